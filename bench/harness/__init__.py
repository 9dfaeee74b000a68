"""The benchmark's harness: the command line, the runner, starting and placing processes, the
background load and the fake exchange's process."""
