"""Inspect AI side of the peer-overhead benchmark (bench/peers/run calls this in .venv).

One sample per line of samples.jsonl: its 41 chat messages (20 user + 20 assistant turns
and the final question) are the sample's input, the seeded fact's value is the target,
the solver is a single `generate()`, the scorer `includes()` (case-insensitive substring,
Inspect's `contains` check).

The model is Inspect's `mockllm/model`. By default it answers every request with the fixed
text "Default output from mockllm/model", which no `includes()` target matches, so it is
given a `custom_outputs` callable (a documented MockLLM option) that answers the way
ctxbench's fake provider does: from what the request contains, here by returning the
sentence of the request that holds the target fact. It is one regex over the messages:
negligible next to the framework's own per-sample work.
"""

import argparse
import json
import re
import sys
import time

from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageUser,
    ModelOutput,
    get_model,
)
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

FACT = re.compile(r"The deploy region is [^.\s]+\.")


def answer_from_request(input, tools, tool_choice, config):
    text = "\n".join(m.text for m in input)
    found = FACT.findall(text)
    return ModelOutput.from_content(
        model="mockllm", content=found[-1] if found else "unknown"
    )


def load(path, one_string):
    samples = []
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            if one_string:
                # The conversation as ONE user message (the form bench/peers/run gives
                # promptfoo-fast and ctxbench's peer-overhead scenario uses).
                text = "\n\n".join(
                    f"{'User' if m['role'] == 'user' else 'Assistant'}: {m['content']}"
                    for m in row["messages"]
                )
                samples.append(Sample(id=row["id"], input=text, target=row["target"]))
                continue
            messages = [
                ChatMessageUser(content=m["content"])
                if m["role"] == "user"
                else ChatMessageAssistant(content=m["content"])
                for m in row["messages"]
            ]
            samples.append(Sample(id=row["id"], input=messages, target=row["target"]))
    return samples


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", required=True)
    p.add_argument("--log-dir", required=True)
    p.add_argument("--summary", required=True, help="write a JSON summary here")
    p.add_argument("--no-log-samples", action="store_true",
                   help="eval(log_samples=False): Inspect's `--no-log-samples`")
    p.add_argument("--one-string", action="store_true",
                   help="the conversation as one user message instead of 41 chat messages")
    a = p.parse_args()

    t0 = time.monotonic()
    task = Task(
        dataset=MemoryDataset(load(a.samples, a.one_string)),
        solver=generate(),
        scorer=includes(),
        name="peer-overhead",
    )
    model = get_model("mockllm/model", custom_outputs=answer_from_request)
    logs = eval(
        task,
        model=model,
        log_dir=a.log_dir,
        display="none",
        log_samples=False if a.no_log_samples else None,
    )
    log = logs[0]
    acc = None
    if log.results and log.results.scores:
        acc = log.results.scores[0].metrics["accuracy"].value
    summary = {
        "status": log.status,
        "samples": log.results.total_samples if log.results else 0,
        "completed": log.results.completed_samples if log.results else 0,
        "accuracy": acc,
        "wall_in_process_s": time.monotonic() - t0,
    }
    with open(a.summary, "w") as f:
        json.dump(summary, f)
    ok = log.status == "success" and acc == 1.0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
