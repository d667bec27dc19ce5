"""The acceptance invocations of issue 4 (estimate with model parallelism, the out-of-memory
verdict, the planner) and their output contracts."""

import json
import time

GPT3 = ["--model", "gpt3-175b", "--gpu", "a100-80gb", "--gpus-per-node", "8",
        "--inter-node", "8x200Gbps", "--global-batch", "1536", "--seq-len", "2048"]
ESTIMATE = ["estimate", *GPT3, "--nodes", "128", "--micro-batch", "1", "--recompute", "full"]


def test_estimate_3d_plan_json(cli):
    code, out, _ = cli(*ESTIMATE, "--tp", "8", "--pp", "16", "--dp", "8", "--json")
    est = json.loads(out)
    assert code == 0
    for key in ("step_time_s", "bubble_s", "tflops_per_gpu", "hardware_tflops_per_gpu", "mfu",
                "hfu", "memory_per_gpu_bytes", "traffic"):
        assert key in est
    assert est["memory_per_gpu_bytes"] < 80e9
    assert est["bubble_s"] > 0 and est["tflops_per_gpu"] < est["hardware_tflops_per_gpu"]
    kinds = {t["parallelism"] for t in est["traffic"]}
    assert {"tp", "pp", "dp"} <= kinds
    for t in est["traffic"]:
        for key in ("group", "op", "bytes_per_step", "link", "time_s", "exposed_s", "leaves_node"):
            assert key in t
    tp = next(t for t in est["traffic"] if t["parallelism"] == "tp")
    assert not tp["leaves_node"] and "NVLink" in tp["link"]


def test_out_of_memory_is_a_verdict_with_the_memory_needed(cli):
    code, out, err = cli(*ESTIMATE, "--tp", "1", "--pp", "1", "--dp", "1024", "--json")
    verdict = json.loads(out)
    assert code == 1 and "Traceback" not in err
    assert verdict["feasible"] is False and verdict["reason"] == "out_of_memory"
    # GPT-3 counts 174.6e9 parameters (96 layers of 12 h^2 + embeddings); x 18 bytes (fp32
    # gradients, handbook-18) is 3.14 TB of state alone, before activations
    assert verdict["memory_per_gpu_bytes"] > 174e9 * 18
    assert "TiB per GPU" in verdict["message"] and "80.0 GiB" in verdict["message"]
    code, out, _ = cli(*ESTIMATE, "--tp", "1", "--pp", "1", "--dp", "1024")
    assert code == 1 and "out of memory" in out


def test_the_verdict_says_the_batch_must_split_before_a_change_that_fits(cli):
    # review PB9: 1536 samples do not split over 1024 replicas, yet the verdict ended with
    # "--zero 3 would need 15.3 GiB (fits)" as if that plan would run. Now the batch problem
    # comes first, and the changes that fit are offered "with a global batch that splits".
    code, out, _ = cli(*ESTIMATE, "--tp", "1", "--pp", "1", "--dp", "1024", "--json")
    message = json.loads(out)["message"]
    batch = message.index("not a multiple of micro_batch x dp = 1 x 1024")
    fits = message.index("--zero 3 (--framework fsdp) would need")
    assert code == 1 and batch < message.index("With a global batch that splits") < fits


def test_planner_acceptance(cli):
    start = time.perf_counter()
    code, out, _ = cli("plan", *GPT3, "--gpus", "1024", "--json")
    seconds = time.perf_counter() - start
    result = json.loads(out)
    assert code == 0 and seconds < 60
    assert result["evaluated"] > 10_000 and result["rejected"]["out_of_memory"] > 0
    assert result["plans"]
    for plan in result["plans"]:
        assert plan["dp"] * plan["tp"] * plan["pp"] * plan["cp"] == 1024
        assert plan["memory_per_gpu_bytes"] <= 80 * 2**30  # an A100 80GB's 80 GiB
        for key in ("micro_batch", "step_time_s", "tflops_per_gpu"):
            assert key in plan
    times = [p["step_time_s"] for p in result["plans"]]
    assert times == sorted(times)
    assert result["plans"][0]["explanation"]


def test_planner_text_has_the_ranked_table_and_reasons(cli):
    code, out, _ = cli("plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "16",
                       "--global-batch", "64", "--seq-len", "8192", "--top", "5")
    assert code == 0
    assert "why tp" in out and "why pp" in out and "Rejected" in out and "out_of_memory" in out


def test_planner_plan_round_trips_through_estimate(cli):
    code, out, _ = cli("plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "16",
                       "--global-batch", "64", "--seq-len", "8192", "--top", "1", "--json")
    best = json.loads(out)["plans"][0]
    flags = best["flags"].split()
    code, out, _ = cli("estimate", "--model", "llama3-8b", "--gpu", "h100", "--nodes", "2",
                       "--global-batch", "64", "--seq-len", "8192", *flags, "--json")
    assert code == 0
    assert json.loads(out)["step_time_s"] == best["step_time_s"]


def test_a_scenario_file_carries_the_plan(cli, tmp_path):
    path = tmp_path / "gpt3.toml"
    path.write_text(
        '[model]\nname = "gpt3-175b"\n'
        '[cluster]\ngpu = "a100-80gb"\nnodes = 16\ngpus_per_node = 8\ninter_node = "8x200Gbps"\n'
        '[training]\nseq_len = 2048\nglobal_batch = 64\nmicro_batch = 1\nrecompute = "selective"\n'
        '[parallel]\ntp = 8\npp = 8\nzero = 1\npp_schedule = "interleaved"\nvirtual_stages = 3\n'
        'sequence_parallel = true\nrank_order = "tp-cp-ep-dp-pp"\n')
    code, out, _ = cli("estimate", str(path), "--json")
    est = json.loads(out)
    assert code == 0
    assert (est["plan"]["tp"], est["plan"]["pp"], est["plan"]["dp"]) == (8, 8, 2)
    assert est["pipeline"]["virtual_stages"] == 3 and est["plan"]["sequence_parallel"]
    # flags override the file
    code, out, _ = cli("estimate", str(path), "--pp-schedule", "1f1b", "--virtual-stages", "1",
                       "--json")
    assert code == 0 and json.loads(out)["pipeline"]["schedule"] == "1f1b"


def test_scaling_sweep_keeps_the_model_parallel_degrees(cli):
    code, out, _ = cli("scale", "--model", "gpt3-175b", "--gpu", "a100-80gb", "--gpus-per-node",
                       "8", "--inter-node", "8x200Gbps", "--seq-len", "2048", "--micro-batch", "1",
                       "--grad-accum", "16", "--tp", "8", "--pp", "8", "--nodes", "8,16", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["gpus"] for r in rows] == [64, 128]
