#!/usr/bin/env python3
"""Synthetic instruction data for the fine-tuning example (docs/FINE_TUNING.md): arithmetic questions
and answers as chat JSON Lines ({"messages": [...]}), preference JSON Lines ({"prompt", "chosen",
"rejected"}: the right sum against a near miss, or with --rejected refusal against a refusal to
answer, a preference a small model learns in a few steps), or evaluation JSON Lines ({"prompt",
"answer"}: prompts for `trident generate --prompts`, scored by tools/score_answers.py).
Deterministic for a seed; standard library only.

--part train | heldout splits the questions in two disjoint sets: a question is held out when a hash
of its text falls in the first --heldout-share of the range, whatever the seed and record count, so
a training set and a held-out set never share a question. Held-out records are distinct questions.

    tools/make_arithmetic_chat.py --records 2000 --seed 1 > data/arith_chat.jsonl
    tools/make_arithmetic_chat.py --format preference --records 500 > data/arith_pref.jsonl
    tools/make_arithmetic_chat.py --part train --records 2000 > data/arith_train.jsonl
    tools/make_arithmetic_chat.py --part heldout --format eval --records 100 > data/arith_heldout.jsonl
"""
import argparse
import hashlib
import itertools
import json
import random
import sys


def fail(message):
    print(f"make_arithmetic_chat.py: {message}", file=sys.stderr)
    sys.exit(2)


def render(a, op, b):
    return f"What is {a} {op} {b}?", a + b if op == "+" else a - b


def held_out(question, share):
    """Whether a question belongs to the held-out part: stable across Python versions and runs."""
    digest = hashlib.sha256(question.encode()).digest()
    return int.from_bytes(digest[:8], "big") < share * 2**64


def questions(rng, args):
    """(question, answer) pairs: drawn with repeats for --part all and train, distinct for heldout."""
    if args.part == "heldout":
        pool = [render(a, op, b) for a, op, b in
                itertools.product(range(args.max_operand + 1), args.ops, range(args.max_operand + 1))]
        pool = [qa for qa in pool if held_out(qa[0], args.heldout_share)]
        if args.records > len(pool):
            fail(f"--records {args.records}: the held-out part has only {len(pool)} distinct questions; "
                 "ask for fewer, or raise --heldout-share or --max-operand")
        yield from rng.sample(pool, args.records)
        return
    for _ in range(args.records):
        while True:
            a, b = rng.randint(0, args.max_operand), rng.randint(0, args.max_operand)
            q, answer = render(a, rng.choice(args.ops), b)
            if args.part == "all" or not held_out(q, args.heldout_share):
                break
        yield q, answer


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1000, help="records to write")
    ap.add_argument("--seed", type=int, default=1, help="random seed")
    ap.add_argument("--max-operand", type=int, default=99, help="operands are drawn from [0, this]")
    ap.add_argument("--ops", default="+-", help="the operations drawn from: + and/or -")
    ap.add_argument("--format", choices=["chat", "preference", "eval"], default="chat")
    ap.add_argument("--part", choices=["all", "train", "heldout"], default="all",
                    help="all questions, or only those of the training or the held-out part")
    ap.add_argument("--heldout-share", type=float, default=0.1,
                    help="the share of the distinct questions in the held-out part")
    ap.add_argument("--rejected", choices=["near-miss", "refusal"], default="near-miss",
                    help="preference records: the rejected answer is a wrong number near the sum, or a refusal")
    ap.add_argument("--system", default="You are a calculator. Answer with the number only.",
                    help="system message of chat records ('' for none)")
    args = ap.parse_args()
    if args.records < 1 or args.max_operand < 1:
        fail("--records and --max-operand must be at least 1")
    if not args.ops or set(args.ops) - set("+-") or len(set(args.ops)) != len(args.ops):
        fail(f"--ops {args.ops!r}: give +, - or +- (each once)")
    if not 0 < args.heldout_share < 1:
        fail(f"--heldout-share {args.heldout_share}: must be in (0, 1)")
    rng = random.Random(args.seed)
    for q, answer in questions(rng, args):
        if args.format == "chat":
            messages = [{"role": "system", "content": args.system}] if args.system else []
            messages += [{"role": "user", "content": q}, {"role": "assistant", "content": str(answer)}]
            record = {"messages": messages}
        elif args.format == "eval":
            record = {"prompt": q, "answer": str(answer)}
        else:
            wrong = answer + rng.choice([-10, -2, -1, 1, 2, 10])
            rejected = str(wrong) if args.rejected == "near-miss" else "I cannot do arithmetic."
            record = {"prompt": q, "chosen": str(answer), "rejected": rejected}
        print(json.dumps(record))


if __name__ == "__main__":
    main()
