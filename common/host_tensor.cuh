// common/host_tensor.cuh: moving fp32 host data to and from the GPU as fp32, fp16 or bf16, in
// NCHW or NHWC order.
//
// The lessons keep every host tensor as NCHW floats (what the CPU references read). Before
// upload, values are rounded to the storage type (round_to), so the CPU reference sees exactly
// the numbers the GPU sees; results come back converted to NCHW floats for the checks.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <vector>

#include "check.cuh"
#include "conv_shape.h"

namespace ht {

struct Dims {
  int n, c, h, w;
  size_t count() const { return size_t(n) * c * h * w; }
};

inline size_t dtype_bytes(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT ? 4 : 2; }

// Round to the storage type and back.
inline void round_to(std::vector<float>& v, cudnnDataType_t dt) {
  if (dt == CUDNN_DATA_HALF)
    for (auto& x : v) x = __half2float(__float2half(x));
  else if (dt == CUDNN_DATA_BFLOAT16)
    for (auto& x : v) x = __bfloat162float(__float2bfloat16(x));
}

// A flat array, stored as `dt`.
inline DeviceBuffer upload(const std::vector<float>& v, cudnnDataType_t dt) {
  DeviceBuffer buf(v.size() * dtype_bytes(dt));
  if (dt == CUDNN_DATA_FLOAT) {
    to_device(buf.as<float>(), v);
  } else if (dt == CUDNN_DATA_HALF) {
    std::vector<__half> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = __float2half(v[i]);
    to_device(buf.as<__half>(), h);
  } else {
    std::vector<__nv_bfloat16> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = __float2bfloat16(v[i]);
    to_device(buf.as<__nv_bfloat16>(), h);
  }
  return buf;
}

inline std::vector<float> download(const DeviceBuffer& buf, size_t n, cudnnDataType_t dt) {
  if (dt == CUDNN_DATA_FLOAT) return to_host(buf.as<float>(), n);
  std::vector<float> v(n);
  if (dt == CUDNN_DATA_HALF) {
    const std::vector<__half> h = to_host(buf.as<__half>(), n);
    for (size_t i = 0; i < n; ++i) v[i] = __half2float(h[i]);
  } else {
    const std::vector<__nv_bfloat16> h = to_host(buf.as<__nv_bfloat16>(), n);
    for (size_t i = 0; i < n; ++i) v[i] = __bfloat162float(h[i]);
  }
  return v;
}

// An NCHW host tensor stored as `dt`, in NHWC order if `nhwc` (a KCRS filter becomes KRSC).
inline DeviceBuffer upload(const std::vector<float>& nchw, Dims d, cudnnDataType_t dt, bool nhwc) {
  return upload(nhwc ? ref::nchw_to_nhwc(nchw, d.n, d.c, d.h, d.w) : nchw, dt);
}

// The device tensor back as NCHW floats.
inline std::vector<float> download(const DeviceBuffer& buf, Dims d, cudnnDataType_t dt, bool nhwc) {
  std::vector<float> v = download(buf, d.count(), dt);
  return nhwc ? ref::nhwc_to_nchw(v, d.n, d.c, d.h, d.w) : v;
}

}  // namespace ht
