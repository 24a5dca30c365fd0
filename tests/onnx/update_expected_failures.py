#!/usr/bin/env python3
"""Rewrites tests/onnx/expected_failures.txt from a conformance report.

    HJIT_ONNX_REPORT=/tmp/onnx.tsv build/tests/test_onnx_conformance
    tests/onnx/update_expected_failures.py /tmp/onnx.tsv

Each failing case gets one line, `name: reason`, the reason starting with its kind (strings,
random draws, sequences and optionals, shapes that depend on values, ops hjit does not convert
yet, ...) followed by what hjit said, without the model's path.
"""
import re
import sys

STRING_OPS = {"StringNormalizer", "TfIdfVectorizer", "RegexFullMatch", "StringConcat", "StringSplit"}
RANDOM_OPS = {"Bernoulli", "RandomUniformLike", "RandomNormalLike", "RandomUniform", "RandomNormal", "Multinomial"}
VALUE_SHAPED_OPS = {"NonZero", "Unique", "Compress", "NonMaxSuppression"}
SEQUENCE_OPS = {"SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase", "SequenceLength", "SequenceEmpty",
                "SplitToSequence", "ConcatFromSequence", "SequenceMap", "Optional", "OptionalGetElement", "OptionalHasElement"}


# Cases whose failure is understood better than the message says.
KNOWN = {
    "test_cast_FLOAT_to_BFLOAT16": "differs: ONNX 1.12's expected values truncate to bfloat16; hjit rounds to nearest even, as PyTorch",
    "test_castlike_BFLOAT16_to_FLOAT": "test data: the 'like' input is stored with shape [1] where the model declares [3, 4]",
    "test_castlike_BFLOAT16_to_FLOAT_expanded": "test data: the 'like' input is stored with shape [1] where the model declares [3, 4]",
    "test_castlike_FLOAT_to_BFLOAT16": "test data: the 'like' input is stored with shape [1] where the model declares [3, 4]",
    "test_castlike_FLOAT_to_BFLOAT16_expanded": "test data: the 'like' input is stored with shape [1] where the model declares [3, 4]",
    "test_adam_multiple": "test data: ONNX 1.12's expected values use epsilon 1e-2, which the model's Adam node does not set "
                          "(with the default, 0.755959 where 0.759136 is expected)",
}


def reason(ops, message):
    message = re.sub(r"model '[^']*': ", "", message).replace("hjit::onnx: ", "")
    message = re.sub(r" \(while tracing '[^']*'\)", "", message)
    op_set = set(ops.split("+")) if ops else set()
    if "STRING" in message or op_set & STRING_OPS:
        kind = "strings"
    elif op_set & RANDOM_OPS or "random draw" in message:
        kind = "random draws"
    elif "not a tensor" in message or op_set & SEQUENCE_OPS:
        kind = "sequences and optionals"
    elif op_set & VALUE_SHAPED_OPS or "must be known when the model is converted" in message:
        kind = "shape depends on values"
    elif re.search(r"does not convert the op|converts 1-d and 2-d windows|has no dilations|Indices output|"
                   r"pools floating-point|runs in training mode", message):
        kind = "not converted yet"
    elif "no opset of the default ONNX domain" in message or "ai.onnx.preview" in message:
        kind = "training preview domain"
    else:
        kind = "differs"
    return f"{kind}: {message}"


def main(report_path, out_path="tests/onnx/expected_failures.txt"):
    lines = []
    for row in open(report_path, encoding="utf-8"):
        group, name, ops, eager, compiled = row.rstrip("\n").split("\t")
        if eager == "ok" and compiled == "ok":
            continue
        why = ("eager: " + eager) if eager != "ok" else ("compiled: " + compiled)
        lines.append(f"{name}: {KNOWN.get(name) or reason(ops, why)}")
    with open(out_path, "w", encoding="utf-8") as out:
        out.write("# ONNX conformance cases hjit does not pass (tests/test_onnx_conformance.cpp), one reason each:\n"
                  "# `name: kind: what hjit says`. Regenerate with tests/onnx/update_expected_failures.py.\n")
        out.write("\n".join(sorted(lines)) + "\n")
    print(f"{len(lines)} cases listed in {out_path}")


if __name__ == "__main__":
    main(*sys.argv[1:])
