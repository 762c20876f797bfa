"""The engine's tensor math (the only torch imports): the model executor, model, paged
attention, KV cache."""
