#!/usr/bin/env python3
"""Synthetic instruction data for the fine-tuning example (docs/FINE_TUNING.md): arithmetic questions
and answers as chat JSON Lines ({"messages": [...]}) or preference JSON Lines ({"prompt", "chosen",
"rejected"}: the right sum against a near miss, or with --rejected refusal against a refusal to
answer, a preference a small model learns in a few steps). Deterministic for a seed; standard
library only.

    tools/make_arithmetic_chat.py --records 2000 --seed 1 > data/arith_chat.jsonl
    tools/make_arithmetic_chat.py --format preference --records 500 > data/arith_pref.jsonl
"""
import argparse
import json
import random
import sys


def question(rng, max_operand):
    a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
    op = rng.choice("+-")
    return f"What is {a} {op} {b}?", a + b if op == "+" else a - b


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1000, help="records to write")
    ap.add_argument("--seed", type=int, default=1, help="random seed")
    ap.add_argument("--max-operand", type=int, default=99, help="operands are drawn from [0, this]")
    ap.add_argument("--format", choices=["chat", "preference"], default="chat")
    ap.add_argument("--rejected", choices=["near-miss", "refusal"], default="near-miss",
                    help="preference records: the rejected answer is a wrong number near the sum, or a refusal")
    ap.add_argument("--system", default="You are a calculator. Answer with the number only.",
                    help="system message of chat records ('' for none)")
    args = ap.parse_args()
    if args.records < 1 or args.max_operand < 1:
        sys.exit("make_arithmetic_chat.py: --records and --max-operand must be at least 1")
    rng = random.Random(args.seed)
    for _ in range(args.records):
        q, answer = question(rng, args.max_operand)
        if args.format == "chat":
            messages = [{"role": "system", "content": args.system}] if args.system else []
            messages += [{"role": "user", "content": q}, {"role": "assistant", "content": str(answer)}]
            record = {"messages": messages}
        else:
            wrong = answer + rng.choice([-10, -2, -1, 1, 2, 10])
            rejected = str(wrong) if args.rejected == "near-miss" else "I cannot do arithmetic."
            record = {"prompt": q, "chosen": str(answer), "rejected": rejected}
        print(json.dumps(record))


if __name__ == "__main__":
    main()
