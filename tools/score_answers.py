#!/usr/bin/env python3
"""Exact-match scoring of generated answers: `trident generate --prompts` output (JSON lines with
"prompt" and "completion") against the {"prompt", "answer"} records it was prompted from (from
tools/make_arithmetic_chat.py --format eval), line by line. A completion is right when, stripped
of surrounding whitespace, it is the answer exactly. Prints one line, `exact match: K/N = A`;
standard library only.

    tools/score_answers.py --answers data/arith_heldout.jsonl --completions generated.jsonl

As a module, is_correct(completion, answer) is the verifier (a reward of 1 or 0 for RL) and
score(answers, completions) the tally.
"""
import argparse
import json
import sys


def is_correct(completion, answer):
    """Whether a completion states the answer and nothing else."""
    return completion.strip() == answer.strip()


def score(answers, completions):
    """(right, total): completions[i], a {"prompt", "completion"}, against answers[i], a {"prompt",
    "answer"} (generate keeps the order of its prompts). Raises ValueError when the lists differ in
    length or in a prompt."""
    if len(completions) != len(answers):
        raise ValueError(f"{len(completions)} completions for {len(answers)} answers")
    right = 0
    for i, (c, a) in enumerate(zip(completions, answers), 1):
        if c["prompt"] != a["prompt"]:
            raise ValueError(f"completion {i} is of the prompt {c['prompt']!r}, answer {i} of {a['prompt']!r}")
        right += is_correct(c["completion"], a["answer"])
    return right, len(completions)


def read_json_lines(path, keys, option):
    """The JSON objects of a file's lines that start with '{' (generate's log lines start with '['),
    each holding `keys` as strings; exits with status 2 naming the option otherwise."""
    rows = []
    try:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                if not line.startswith("{"):
                    continue
                row = json.loads(line)
                if not all(isinstance(row.get(k), str) for k in keys):
                    raise ValueError(f"line {number} lacks the string fields {', '.join(keys)}")
                rows.append(row)
    except (OSError, ValueError) as e:
        fail(f"{option} {path}: {e}")
    if not rows:
        fail(f"{option} {path}: no JSON record")
    return rows


def fail(message):
    print(f"score_answers.py: {message}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", required=True, help="JSON lines with prompt and answer")
    ap.add_argument("--completions", required=True, help="trident generate --prompts output")
    args = ap.parse_args()
    answers = read_json_lines(args.answers, ("prompt", "answer"), "--answers")
    completions = read_json_lines(args.completions, ("prompt", "completion"), "--completions")
    try:
        right, total = score(answers, completions)
    except ValueError as e:
        fail(f"--completions {args.completions} against --answers {args.answers}: {e}")
    print(f"exact match: {right}/{total} = {right / total:.3f}")


if __name__ == "__main__":
    main()
