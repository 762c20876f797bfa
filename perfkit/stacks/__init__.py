"""Stacks: recording (py-spy, thread sampler, torch profiler), folded, speedscope, SVG, summary."""
