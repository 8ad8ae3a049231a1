"""Reads TensorBoard event files back with TensorBoard's own reader, as an independent check of
what report writes: `read-tensorboard.py FOLDER` prints one JSON object,
{"<run>": {"<tag>": [[step, value], ...]}}, where <run> is each subfolder of FOLDER holding event
files ("." for files directly in FOLDER). Run it with the test venv's python
(scripts/python-env.sh); it needs no TensorFlow.

Exit codes: 0 read, 1 a record failed its length or CRC check (TensorBoard itself would stop
there without a word), 2 usage error or no event files under FOLDER.
"""

import json
import logging
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


class DataLoss(logging.Handler):
    """Collects the records TensorBoard's loader gave up on: it logs a bad CRC or a short record
    only at debug level and returns the events before it, which would pass for a short curve."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.problems = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Truncated record"):
            self.problems.append(message)
        elif record.levelno >= logging.WARNING:
            print(f"read-tensorboard: {message}", file=sys.stderr)


def run_folders(root):
    """Folders under root that hold an event file, as paths relative to root, sorted."""
    runs = set()
    for folder, _, files in os.walk(root):
        if any(".tfevents." in name for name in files):
            runs.add(os.path.relpath(folder, root))
    return sorted(runs)


def scalars(folder):
    # size_guidance 0 keeps every scalar; the default samples down to 10,000 a tag.
    accumulator = EventAccumulator(folder, size_guidance={"scalars": 0})
    accumulator.Reload()
    return {
        tag: [[event.step, event.value] for event in accumulator.Scalars(tag)]
        for tag in sorted(accumulator.Tags()["scalars"])
    }


def main(argv):
    if len(argv) != 2:
        print("usage: read-tensorboard.py FOLDER", file=sys.stderr)
        return 2
    root = argv[1]
    if not os.path.isdir(root):
        print(f"read-tensorboard: {root}: not a folder", file=sys.stderr)
        return 2
    runs = run_folders(root)
    if not runs:
        print(f"read-tensorboard: {root}: no event files (*.tfevents.*) under it", file=sys.stderr)
        return 2
    data_loss = DataLoss()
    logger = logging.getLogger("tensorboard")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(data_loss)
    logger.propagate = False
    result = {run: scalars(os.path.join(root, run)) for run in runs}
    if data_loss.problems:
        for problem in data_loss.problems:
            print(f"read-tensorboard: {problem}", file=sys.stderr)
        return 1
    try:
        json.dump(result, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # A reader that stopped early (| head) is not an error; keep Python's exit flush quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
