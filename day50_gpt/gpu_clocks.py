"""day50_gpt/gpu_clocks.py: the GPU's clocks, power and throttle reasons as the peer scripts record them
(the same fields and names as common/clocks.h writes into every results file), read through NVML
(nvidia-ml-py) or, without it, parsed from nvidia-smi. Host-only; torch_peer.py --self-test tests it."""
import contextlib
import subprocess

# common/clocks.h: the bits of nvmlDeviceGetCurrentClocksEventReasons and their names.
REASONS = [(0x1, "GPU idle"), (0x2, "applications clocks setting"), (0x4, "SW power cap"), (0x8, "HW slowdown"),
           (0x10, "sync boost"), (0x20, "SW thermal slowdown"), (0x40, "HW thermal slowdown"),
           (0x80, "HW power brake"), (0x100, "display clock setting")]
SMI_REASONS = {"Idle": 0x1, "Applications Clocks Setting": 0x2, "SW Power Cap": 0x4, "HW Slowdown": 0x8,
               "Sync Boost": 0x10, "SW Thermal Slowdown": 0x20, "HW Thermal Slowdown": 0x40,
               "HW Power Brake Slowdown": 0x80, "Display Clock Setting": 0x100}


def unreliable(bits):
    """clocks::unreliable: the brake and HW thermal cut the clocks 2x or more; SW power cap is normal."""
    why = "HW power brake" if bits & 0x80 else ""
    if bits & 0x40:
        why += (" and " if why else "") + "HW thermal slowdown"
    if not why and bits & 0x8:
        why = "HW slowdown"
    return why + " active" if why else ""


def clock_json(sm_mhz=None, mem_mhz=None, power_w=None, bits=None):
    """clocks::to_json: only what is known is written."""
    v = {k: x for k, x in (("sm_mhz", sm_mhz), ("mem_mhz", mem_mhz), ("power_w", power_w)) if x is not None}
    if bits is None:
        return v
    names = [n for b, n in REASONS if bits & b] + [f"unknown reason {hex(1 << i)}" for i in range(64)
                                                   if bits & (1 << i) and not any(b == 1 << i for b, _ in REASONS)]
    v.update(reasons=names, reasons_bits=bits, hw_slowdown=bool(bits & 0x8), hw_power_brake=bool(bits & 0x80),
             thermal=bool(bits & 0x60), sw_power_cap=bool(bits & 0x4), unreliable=unreliable(bits))
    return v


def parse_smi(text):
    """`nvidia-smi -q -d PERFORMANCE,CLOCK,POWER` for one GPU -> clock_json."""
    section, bits, known, sm, mem, power = None, 0, False, None, None, None
    for line in text.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        key, _, val = (s.strip() for s in line.strip().partition(":"))
        if indent <= 4 and not val:
            section = key
        elif section in ("Clocks Event Reasons", "Clocks Throttle Reasons") and val in ("Active", "Not Active"):
            known = True
            bits |= SMI_REASONS.get(key, 0) if val == "Active" else 0
        elif section == "Clocks" and key in ("SM", "Memory") and val[:1].isdigit():
            sm, mem = (int(val.split()[0]), mem) if key == "SM" else (sm, int(val.split()[0]))
        elif "Power" in (section or "") and key in ("Power Draw", "Average Power Draw", "Instantaneous Power Draw"):
            try:
                power = power if power is not None else float(val.split()[0])
            except (ValueError, IndexError):  # "N/A"
                pass
    return clock_json(sm, mem, power, bits if known else None)


def read_clocks(uuid, index):
    """One reading of the GPU's clocks, power and throttle reasons: NVML (nvidia-ml-py), else nvidia-smi."""
    try:
        import pynvml as N

        N.nvmlInit()
        try:
            h = None
            if uuid:
                with contextlib.suppress(Exception):
                    h = N.nvmlDeviceGetHandleByUUID(uuid)
            h = h or N.nvmlDeviceGetHandleByIndex(index)
            get_bits = getattr(N, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                N.nvmlDeviceGetCurrentClocksThrottleReasons
            clk = [N.nvmlDeviceGetClockInfo(h, c) for c in (N.NVML_CLOCK_SM, N.NVML_CLOCK_MEM)]
            return clock_json(clk[0], clk[1], N.nvmlDeviceGetPowerUsage(h) / 1000.0, int(get_bits(h)))
        finally:
            N.nvmlShutdown()
    except Exception:  # no pynvml, or NVML refused: ask nvidia-smi
        pass
    try:
        r = subprocess.run(["nvidia-smi", "-q", "-d", "PERFORMANCE,CLOCK,POWER", "-i", uuid or str(index)],
                           capture_output=True, text=True, timeout=30)
        return parse_smi(r.stdout) if r.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired):
        return {}


def throttle_summary(samples, ours_runs):
    """The top-level `throttled`: "" when every reading was fine, "unknown" when none could say."""
    whys = [s["unreliable"] for s in samples if s.get("unreliable")]
    whys += [f"./build/gpt: {o['throttled']}" for o in ours_runs if o.get("throttled")]
    known = any("unreliable" in s for s in samples) or any(o.get("throttled") is not None for o in ours_runs)
    return "; ".join(dict.fromkeys(whys)) if known else "unknown"


# nvidia-smi -q -d PERFORMANCE,CLOCK,POWER output for the self-test (a brake and a SW cap active).
SMI_SAMPLE = """GPU 00000000:19:00.0
    Clocks Event Reasons
        Idle                              : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Active
            HW Thermal Slowdown           : Not Active
            HW Power Brake Slowdown       : Active
    Clocks Event Reasons Counters
        SW Power Capping                  : 0 us
    Clocks
        SM                                : 1980 MHz
        Memory                            : 3201 MHz
    GPU Power Readings
        Average Power Draw                : N/A
        Instantaneous Power Draw          : 123.45 W
"""
