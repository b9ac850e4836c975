"""Cross-memory attach against memcpy: python probe_cma.py NBYTES (forks a child, reads its copy of
an array with process_vm_readv, then copies the same array with numpy; prints both rates)."""
import ctypes, os, time, numpy as np, sys
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]
libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.POINTER(iovec), ctypes.c_ulong, ctypes.POINTER(iovec), ctypes.c_ulong, ctypes.c_ulong]
libc.process_vm_readv.restype = ctypes.c_ssize_t
n = int(sys.argv[1])
src = np.arange(n // 8, dtype=np.float64)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r); os.write(w, b"x"); time.sleep(30); os._exit(0)
os.read(r, 1)
# child has same address space copy (COW) -> read from child's src address
dst = np.empty_like(src)
local = iovec(dst.ctypes.data, n); remote = iovec(src.ctypes.data, n)
for k in range(3):
    t = time.perf_counter(); reps = 50
    for _ in range(reps):
        got = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    dt = (time.perf_counter() - t) / reps
    assert got == n, (got, ctypes.get_errno())
    t = time.perf_counter()
    for _ in range(reps): np.copyto(dst, src)
    dc = (time.perf_counter() - t) / reps
    print(f"{n} B: process_vm_readv {dt*1e6:.0f} us ({n/dt/1e9:.1f} GB/s), memcpy {dc*1e6:.0f} us")
assert (dst == src).all()
os.kill(pid, 9)
