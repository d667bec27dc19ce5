"""Checks against the world, never imported by the model core: published training runs
(:mod:`.published`), the A100 vs A800 lecture case (:mod:`.linkrace`) and the reproduction of
"The Impact of GPU Networking (Part 1)" (:mod:`.reproduce`)."""
