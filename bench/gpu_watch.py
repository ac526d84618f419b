#!/usr/bin/env python3
"""Watching a GPU from outside, without a CUDA context, and the neighbours a benchmark runs beside.

GpuWatch polls NVML (libnvidia-ml.so.1, through ctypes: no Python package, no CUDA context in
the watching process) while a program runs: the GPU memory of the program's own processes
(NVML's per-process figure, the same for every program measured) and the device's used memory
above what it was before the program started. HostWatch reads /proc/stat and the child's
rusage: how much CPU the program used and how much everything else on the machine used
meanwhile, so a slow run can be told from a loaded machine.

Run as a program it is a neighbour for bench/compare_gpu.py --neighbor:
  gpu_watch.py --neighbor cuda   holds a CUDA context (libcudart, through ctypes) and asks
                                 cudaMemGetInfo every 50 ms, as a Python harness that imports
                                 torch and polls torch.cuda.mem_get_info does
  gpu_watch.py --neighbor nvml   asks NVML for memory and utilisation every 50 ms, as a
                                 monitoring agent (nvidia-smi -lms 50, DCGM) does
It runs until it is terminated. Exit status 77 where there is no GPU to neighbour.
"""
import argparse
import ctypes
import os
import resource
import sys
import threading
import time

SKIP = 77
POLL_S = 0.05


class NvmlError(RuntimeError):
    pass


class _Memory(ctypes.Structure):
    _fields_ = [('total', ctypes.c_ulonglong), ('free', ctypes.c_ulonglong), ('used', ctypes.c_ulonglong)]


class _Utilization(ctypes.Structure):
    _fields_ = [('gpu', ctypes.c_uint), ('memory', ctypes.c_uint)]


class _ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t of the _v3 entry points
    _fields_ = [('pid', ctypes.c_uint), ('usedGpuMemory', ctypes.c_ulonglong),
                ('gpuInstanceId', ctypes.c_uint), ('computeInstanceId', ctypes.c_uint)]


class Nvml:
    """The few NVML calls the watch needs, on GPU `index`."""

    def __init__(self, index=0):
        try:
            self.lib = ctypes.CDLL('libnvidia-ml.so.1')
        except OSError as err:
            raise NvmlError(f'libnvidia-ml.so.1 cannot be loaded ({err}): no NVIDIA driver here')
        self.call('nvmlInit_v2')
        count = ctypes.c_uint()
        self.call('nvmlDeviceGetCount_v2', ctypes.byref(count))
        if index >= count.value:
            raise NvmlError(f'NVML sees {count.value} GPU(s); there is no GPU {index}')
        self.device = ctypes.c_void_p()
        self.call('nvmlDeviceGetHandleByIndex_v2', ctypes.c_uint(index), ctypes.byref(self.device))

    def call(self, name, *args):
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            self.lib.nvmlErrorString.restype = ctypes.c_char_p
            raise NvmlError(f'{name}: {self.lib.nvmlErrorString(rc).decode()} (NVML status {rc})')

    def used_bytes(self):
        m = _Memory()
        self.call('nvmlDeviceGetMemoryInfo', self.device, ctypes.byref(m))
        return m.used

    def utilization(self):
        u = _Utilization()
        self.call('nvmlDeviceGetUtilizationRates', self.device, ctypes.byref(u))
        return u.gpu

    def process_bytes(self):
        """{pid: GPU memory in bytes} of the compute processes on the GPU."""
        n = ctypes.c_uint(64)
        infos = (_ProcessInfo * n.value)()
        self.call('nvmlDeviceGetComputeRunningProcesses_v3', self.device, ctypes.byref(n), infos)
        return {infos[i].pid: infos[i].usedGpuMemory for i in range(n.value)}


def descendants(pid):
    """pid and every process below it, from /proc (compile workers, launchers)."""
    children = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open(f'/proc/{entry}/stat') as f:
                    ppid = int(f.read().rsplit(')', 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        found.add(p)
        todo += children.get(p, [])
    return found


class GpuWatch:
    """Polls NVML every 50 ms while a program runs; its peaks, in bytes, afterwards.

    process_peak: the largest sum of NVML's per-process memory over the program's processes
    (None where NVML names none of them: a container whose PIDs NVML does not see);
    device_rise: the largest rise of the device's used memory above its level at start;
    busy: the mean GPU utilisation NVML reported, in per cent."""

    def __init__(self, nvml):
        self.nvml, self.stop_flag = nvml, threading.Event()
        self.process_peak = self.device_rise = self.busy = None
        self.pid, self.samples = None, []

    def start(self, pid):
        self.pid, self.base = pid, self.nvml.used_bytes()
        self.device_rise = 0
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()

    def poll(self):
        while not self.stop_flag.wait(POLL_S):
            try:
                self.sample()
            except NvmlError:
                return

    def sample(self):
        self.device_rise = max(self.device_rise, self.nvml.used_bytes() - self.base)
        self.samples.append(self.nvml.utilization())
        mine = descendants(self.pid)
        owned = [b for p, b in self.nvml.process_bytes().items() if p in mine]
        if owned:
            self.process_peak = max(self.process_peak or 0, sum(owned))

    def stop(self):
        self.stop_flag.set()
        self.thread.join()
        if self.samples:
            self.busy = sum(self.samples) / len(self.samples)


def _cpu_jiffies():
    with open('/proc/stat') as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]   # all but idle and iowait


class HostWatch:
    """CPU seconds the program used, and those the rest of the machine used, while it ran."""

    def __enter__(self):
        self.t0, self.busy0 = time.time(), _cpu_jiffies()
        self.own0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return self

    def __exit__(self, *exc):
        hz = os.sysconf('SC_CLK_TCK')
        own1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.wall = time.time() - self.t0
        self.own = (own1.ru_utime - self.own0.ru_utime) + (own1.ru_stime - self.own0.ru_stime)
        self.others = max(0.0, (_cpu_jiffies() - self.busy0) / hz - self.own)
        return False

    def words(self):
        return (f'host CPU: the program {self.own:.1f} s, everything else {self.others:.1f} s, '
                f'in {self.wall:.1f} s wall on {os.cpu_count()} CPUs')


def neighbour_cuda():
    """A CUDA context that asks for free memory every 50 ms, as a torch-importing harness does."""
    for name in ('libcudart.so.13', 'libcudart.so.12', 'libcudart.so'):
        try:
            rt = ctypes.CDLL(name)
            break
        except OSError:
            rt = None
    if rt is None:
        return 'no libcudart (CUDA runtime) to load'
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    if rt.cudaFree(None) != 0:
        return 'cudaFree(0) failed: no CUDA GPU here'
    while True:
        rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        time.sleep(POLL_S)


def neighbour_nvml():
    """A monitoring agent: memory, utilisation and processes from NVML every 50 ms."""
    try:
        nvml = Nvml()
    except NvmlError as err:
        return str(err)
    while True:
        nvml.used_bytes(), nvml.utilization(), nvml.process_bytes()
        time.sleep(POLL_S)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument('--neighbor', choices=('cuda', 'nvml'), required=True,
                   help='what to run beside a benchmark until terminated')
    args = p.parse_args(argv)
    why = neighbour_cuda() if args.neighbor == 'cuda' else neighbour_nvml()
    print(f'gpu_watch.py --neighbor {args.neighbor}: {why}', file=sys.stderr)
    return SKIP


if __name__ == '__main__':
    sys.exit(main())
