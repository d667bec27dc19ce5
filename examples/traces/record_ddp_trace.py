import json, os, socket, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule

# sizes: input, hidden and output features of the two-layer model, DDP's bucket cap (MB), the
# batch and, optionally, the steps profiled (2 unless given); the trace in this folder used the
# defaults, tests/distributed/test_trace_ddp.py others
SIZES = (64, 256, 64, 0.03, 4)


def work(rank, port, out, sizes=SIZES):
    d_in, hidden, d_out, bucket_mb, batch, *steps = sizes
    active = int(steps[0]) if steps else 2
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(int(d_in), int(hidden)), torch.nn.ReLU(),
                                torch.nn.Linear(int(hidden), int(d_out)))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=float(bucket_mb))
    opt = torch.optim.AdamW(ddp.parameters())
    x = torch.randn(int(batch), int(d_in))
    trace = lambda p: p.export_chrome_trace(f"{out}/rank{rank}.json")
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=active), on_trace_ready=trace) as prof:
        for _ in range(2 + active):
            ddp(x).square().mean().backward(); opt.step(); opt.zero_grad(); prof.step()
    if rank == 0:
        data = ddp._get_ddp_logging_data()
        with open(f"{out}/ddp.json", "w") as f:
            json.dump({"rebuilt_bucket_sizes": data.get("rebuilt_bucket_sizes")}, f)
    dist.destroy_process_group()

if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    sizes = tuple(float(v) for v in sys.argv[2:]) or SIZES
    mp.spawn(work, args=(port, sys.argv[1], sizes), nprocs=2)
