"""Memory per GPU: training state per parameter under each convention and ZeRO stage
(:mod:`.state`), activations per layer (:mod:`.activations`), and every pipeline stage's bytes
against the GPU's memory (:mod:`.stage`)."""
