"""The serving engine: bookkeeping here (no torch: blocks, scheduler, sequences, the step
loop, executors), tensor math in layers/, the tool-call guard in guard/."""
