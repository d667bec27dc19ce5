import json, os, socket, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule

def work(rank, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.03)
    opt = torch.optim.AdamW(ddp.parameters())
    x = torch.randn(4, 64)
    trace = lambda p: p.export_chrome_trace(f"{out}/rank{rank}.json")
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=2), on_trace_ready=trace) as prof:
        for _ in range(4):
            ddp(x).square().mean().backward(); opt.step(); opt.zero_grad(); prof.step()
    if rank == 0:
        data = ddp._get_ddp_logging_data()
        with open(f"{out}/ddp.json", "w") as f:
            json.dump({"rebuilt_bucket_sizes": data.get("rebuilt_bucket_sizes")}, f)
    dist.destroy_process_group()

if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mp.spawn(work, args=(port, sys.argv[1]), nprocs=2)
