# PyTorch on the GPU, the peer of bench/gpu.cpp's rows, run by scripts/bench-gpu (Python eager: its
# per-call overhead includes the interpreter, so libtorch C++ would be somewhat lower).
import time, torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")
def best(fn, rounds=10):
    t = []
    for _ in range(rounds):
        torch.cuda.synchronize(); s = time.perf_counter(); fn(); torch.cuda.synchronize(); t.append(time.perf_counter() - s)
    return min(t)
n = 4096
for dt in (torch.float32, torch.bfloat16):
    a = torch.randn(n, n, device=dev, dtype=dt); b = torch.randn(n, n, device=dev, dtype=dt)
    def g():
        for _ in range(10): torch.matmul(a, b)
    g(); s = best(g) / 10
    print(f"torch GEMM 4096^3 {dt}: {2*n**3/s/1e12:.1f} TFLOP/s")
m = 256 << 20
a = torch.rand(m, device=dev); b = torch.rand(m, device=dev)
def ad():
    for _ in range(5): a + b
ad(); s = best(ad) / 5
print(f"torch add 256M float32: {3*4*m/s/1e9:.0f} GB/s")
a = torch.tensor([1., -2., 3., -4.], device=dev); b = torch.tensor([.5, .5, -5., 5.], device=dev)
def small():
    for _ in range(20000): torch.relu(a + b)
small(); s = best(small, 5) / 20000
print(f"torch eager relu(a + b), 4 floats, per call: {s*1e6:.2f} us")
model = torch.nn.Sequential(torch.nn.Linear(784,128), torch.nn.ReLU(), torch.nn.Linear(128,128), torch.nn.ReLU(),
                            torch.nn.Linear(128,128), torch.nn.ReLU(), torch.nn.Linear(128,10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 784, device=dev); y = torch.randint(0, 10, (256,), device=dev)
def step():
    opt.zero_grad(set_to_none=True); l = torch.nn.functional.cross_entropy(model(x), y); l.backward(); opt.step(); return l.item()
for _ in range(10): step()
def steps():
    for _ in range(100): step()
s = best(steps, 5) / 100
print(f"torch eager MLP 784-128x3-10 step, batch 256: {s*1e3:.3f} ms")
