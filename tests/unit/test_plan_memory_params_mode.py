"""Memory with only a parameter count: what needs the model's shape is left out, not guessed."""

from __future__ import annotations

import json


def test_zero3_without_a_shape_counts_the_sharded_state_and_no_layer_buffers(cli):
    # 70e9 parameters, ZeRO-3 alone implies FSDP: fp32 sharded weights, fp32 gradient shard and
    # Adam, 16 B/param over 4 nodes x 8 GPUs = 32 ranks: 16 x 70e9 / 32 = 35.0e9 B per GPU. The
    # gathered layers' buffers need one layer's size, hence the layer count: unknown, so 0 and
    # the memory "incomplete" (a whole-model "layer" would add 3 x 70e9 x 2 B = 420 GB and rank
    # ZeRO-3 behind ZeRO-2)
    code, out, err = cli("estimate", "--params", "70B", "--seq-len", "2048", "--gpu", "h100",
                         "--nodes", "4", "--zero", "3", "--json")
    assert code == 0, err
    memory = json.loads(out)["memory"]
    assert memory["buffers_bytes"] == 0
    assert memory["weights_bytes"] + memory["gradients_bytes"] + memory["optimizer_bytes"] \
        + memory["master_bytes"] == 16 * 70e9 / 32
    assert memory["complete"] is False and memory["activations_bytes"] is None
