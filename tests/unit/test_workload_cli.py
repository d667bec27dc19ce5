"""``willitscale model``: the acceptance invocations and the error paths."""

import json

import pytest


def test_acceptance_gpt2_large(cli):
    code, out, _ = cli("model", "gpt2-large", "--json")
    data = json.loads(out)
    assert code == 0
    # 12h^2 + 13h = 19,677,440 per layer (h 1280) x 36 + final LN 2,560 = 708,390,400;
    # + wte 64,328,960 + wpe 1,310,720 = 774,030,080 (tests/unit/test_workload_params.py).
    assert data["params_total"] == 774_030_080
    assert data["params_non_embedding"] == 708_390_400


def test_acceptance_gpt2(cli):
    data = json.loads(cli("model", "gpt2", "--json")[1])
    assert data["params_total"] == 124_439_808
    assert data["params_non_embedding"] == 85_056_000


def test_json_has_unit_named_keys_and_consistent_numbers(cli):
    data = json.loads(cli("model", "gpt2", "--json", "--seq-len", "512", "--micro-batch", "4",
                          "--recompute", "full", "--convention", "handbook-18")[1])
    for key in ("flops_per_token_training", "flops_per_token_training_hardware", "state_bytes_total",
                "activation_bytes_per_microbatch", "flops_per_sequence_training", "state_bytes_per_gpu"):
        assert key in data
    assert data["seq_len"] == 512 and data["micro_batch"] == 4
    # handbook-18: 18 bytes x 124,439,808 params
    assert data["state_bytes_total"] == 18 * 124_439_808
    assert data["flops_per_sequence_training"] == pytest.approx(512 * data["flops_per_token_training"])
    assert data["flops_per_token_training_hardware"] == data["flops_per_token_training_recompute_full"]


def test_zero_and_tp_flags(cli):
    data = json.loads(cli("model", "llama2-7b", "--json", "--zero-stage", "3", "--dp", "8")[1])
    # ZeRO-3 over 8: 16 bytes x 6,738,415,616 / 8
    assert data["state_bytes_per_gpu"] == pytest.approx(16 * 6_738_415_616 / 8)
    tp = json.loads(cli("model", "llama2-7b", "--json", "--tp", "2", "--sequence-parallel")[1])
    assert tp["params_per_gpu"] < data["params_total"]


def test_readable_output(cli):
    code, out, _ = cli("model", "mixtral-8x7b", "--seq-len", "4096")
    assert code == 0
    assert "46,702,792,704" in out and "active" in out


def test_list(cli):
    code, out, _ = cli("model", "--list")
    assert code == 0 and "llama3-405b" in out
    rows = json.loads(cli("model", "list", "--json")[1])
    assert {"gpt2", "mixtral-8x7b"} <= {r["name"] for r in rows}


def test_hf_path(cli):
    from pathlib import Path

    path = Path(__file__).parent.parent / "data" / "hf_configs" / "llama2-7b.json"
    data = json.loads(cli("model", str(path), "--json")[1])
    assert data["params_total"] == 6_738_415_616


def test_errors_are_one_line(cli):
    code, _, err = cli("model", "gpt-2-larg")
    assert code == 2 and "did you mean" in err and "Traceback" not in err
    code, _, err = cli("model", "gpt2", "--seq-len", "2048")
    assert code == 2 and "1024" in err
    code, _, err = cli("model", "gpt2", "--convention", "zero16")
    assert code == 2 and "zero-16" in err
    code, _, err = cli("model")
    assert code == 2 and "--list" in err


def test_tp_that_does_not_split_the_model(cli):
    code, _, err = cli("model", "gpt2", "--tp", "5")
    assert code == 2 and "heads = 12" in err
