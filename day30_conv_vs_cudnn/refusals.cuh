// day30_conv_vs_cudnn/refusals.cuh: part 4, what cuDNN refuses, and how a program goes on.
#pragma once

#include "conv_ctx.cuh"

// ---- 4. What cuDNN refuses ----------------------------------------------------------------------

static void refusals(Ctx& cx) {
  std::printf("\n== what cuDNN refuses (each reported, then the program goes on)\n");
  auto note = [&](const std::string& what, const std::string& outcome, json::Value extra = json::Value()) {
    std::printf("  %-58s -> %s\n", what.c_str(), outcome.c_str());
    json::Value j = json::Value::object();
    j["case"] = what;
    j["outcome"] = outcome;
    if (extra.kind() != json::Value::Null) j["workspace_bytes"] = extra;
    cx.refusals.push(j);
  };
  // (1) A 7x7 filter on a 4x4 input with no padding: there is no output position.
  {
    const ConvShape s{1, 1, 4, 4, 1, 7, 7, 0, 1, 1};
    dnn::ConvDesc d(s, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH);
    note("7x7 filter on a 4x4 input, no padding", d.ok() ? "accepted (unexpected)" : d.error);
    cx.res->add(verify::fact("cuDNN refuses a filter larger than the padded input", !d.ok(), "exact",
                             d.ok() ? "cuDNN accepted it" : d.error));
  }
  // (2) Algorithm / layout / type pairs that do not exist: ask each forward algorithm for its
  // workspace on fp16 NHWC with a 7x7 stride-2 filter. NOT_SUPPORTED is an answer, not a crash.
  {
    const ConvShape s{2, 3, 32, 32, 8, 7, 7, 3, 2, 1};
    dnn::ConvDesc d(s, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH);
    if (!d.ok()) {
      note("fp16 NHWC 7x7 stride 2", "descriptors refused: " + d.error);
    } else {
      std::string yes, no;
      for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
        size_t b = 0;
        const cudnnStatus_t st = dnn::workspace_size(cx.dnn, d, Dir::Fwd, a, &b);
        if (st == CUDNN_STATUS_SUCCESS)
          append(yes, dnn::algo_name(Dir::Fwd, a));
        else
          append(no, std::string(dnn::algo_name(Dir::Fwd, a)) + " (" + cudnnGetErrorString(st) + ")");
      }
      note("forward algorithms on fp16 NHWC, 7x7 stride 2: supported", yes.empty() ? "none" : yes);
      note("forward algorithms on fp16 NHWC, 7x7 stride 2: refused", no.empty() ? "none" : no);
      // Running one that was refused: the call returns the status; nothing is launched.
      DeviceBuffer x(size_t(s.x_elems()) * 2), w(size_t(s.w_elems()) * 2), y(size_t(s.y_elems()) * 2);
      const cudnnStatus_t st = dnn::run(cx.dnn, d, Dir::Fwd, CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_TENSOR_OP_MATH,
                                        {x.as(), w.as(), y.as()}, nullptr, 0);
      note("cudnnConvolutionForward with FFT on it anyway",
           st == CUDNN_STATUS_SUCCESS ? "ran (unexpected)" : dnn::status_text(st));
    }
  }
  // (3) Workspace beyond what we may allocate: each algorithm's request against free memory,
  // and Find offered only 1 MiB, so the algorithms that need more come back marked as such.
  {
    const ConvShape s{8, 64, 56, 56, 64, 3, 3, 1, 1, 1};
    dnn::ConvDesc d(s, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    std::string reqs;
    json::Value by_algo = json::Value::object();  // the same requests as numbers, for the notes
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
      size_t b = 0;
      if (dnn::workspace_size(cx.dnn, d, Dir::Fwd, a, &b) != CUDNN_STATUS_SUCCESS) continue;
      by_algo[dnn::algo_name(Dir::Fwd, a)] = (long long)b;
      char t[96];
      std::snprintf(t, sizeof t, "%s %.1f MiB%s", dnn::algo_name(Dir::Fwd, a), b / 1048576.0,
                    b > free_b / 2 ? " (more than half of free memory: would be skipped)" : "");
      append(reqs, t);
    }
    note("workspace each algorithm asks for, " + s.str(), reqs, by_algo);
    DeviceBuffer x(s.x_elems() * 4), w(s.w_elems() * 4), y(s.y_elems() * 4);
    CUDA_CHECK(cudaMemset(x.as(), 0, x.bytes()));  // Find runs every algorithm on these: give it defined inputs
    CUDA_CHECK(cudaMemset(w.as(), 0, w.bytes()));
    const size_t offer = size_t(1) << 20;
    const auto found = dnn::find(cx.dnn, d, Dir::Fwd, {x.as(), w.as(), y.as()}, cx.ws.get(offer), offer);
    std::string ok, skipped;
    for (const auto& f : found)
      append(f.ok() ? ok : skipped, f.ok() ? f.name : f.name + " (" + cudnnGetErrorString(f.status) + ")");
    note("Find with a 1 MiB workspace: ran", ok.empty() ? "none" : ok);
    note("Find with a 1 MiB workspace: left out (workspace too small or unsupported)",
         skipped.empty() ? "none" : skipped);
  }
}
