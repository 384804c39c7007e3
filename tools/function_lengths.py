#!/usr/bin/env python3
"""Lists the C++ functions longer than a number of lines.

Usage: tools/function_lengths.py [--over N] [--max N] [--all] PATH...

Each PATH is a source file or a folder (searched recursively for .cc .cpp .h .hpp .cu .cuh;
folders named build* are skipped). Prints one line per function longer than the --over bound
(default 150, or --max when only --max is given), longest first:

    LINES path:line name

LINES counts the lines from a function's opening brace to its closing brace, both included (blank
and comment lines count too); path:line is where its name is. --max N exits 1 when a function is
longer than N lines (after printing the list); --all prints every function.

What counts as a function: every brace-delimited function body at namespace or class scope (free
functions, member functions defined in or out of their class, constructors with initializer
lists, operators, gtest TEST bodies, lambdas outside any function). Everything inside a function
body (lambdas, local classes, nested blocks) belongs to that function. Class, struct, union, enum
and namespace bodies are not functions; their member functions are (named Class::member).

The scan is lexical, not a C++ parser: comments, string/character literals (raw strings
included) and preprocessor lines are blanked first, then braces are matched and each opening
brace outside a function is classified by the text before it (from the previous ';', '{' or
'}'). It has no dependencies beyond Python 3, so it runs wherever the sources are.
"""

import argparse
import os
import re
import sys

EXTENSIONS = (".cc", ".cpp", ".cxx", ".h", ".hpp", ".cu", ".cuh")


def blank_non_code(src):
    """Returns `src` with comments, literals and preprocessor lines replaced by spaces.

    Newlines are kept, so offsets and line numbers stay those of the original text. A string or
    character literal keeps its quotes (`""`, `''`) so the text around it still reads as an
    expression.
    """
    out = list(src)
    n = len(src)
    i = 0
    at_line_start = True  # only whitespace so far on this line

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if at_line_start and c == "#":
            # A preprocessor directive, with its backslash continuations.
            j = i
            while j < n:
                if src[j] == "\n" and src[j - 1] != "\\":
                    break
                j += 1
            # Comments that start on the directive line are blanked with it; a /* that runs past
            # the directive is rare enough to ignore.
            blank(i, j)
            i = j
            continue
        at_line_start = False
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
            continue
        if c == '"':
            # A raw string: R"delim( ... )delim", with an optional encoding prefix before the R.
            m = re.compile(r'(?:u8|u|U|L)?R$').search(src, max(0, i - 3), i)
            if m and (m.start() == 0 or not (src[m.start() - 1].isalnum() or
                                             src[m.start() - 1] == "_")):
                open_paren = src.find("(", i)
                delim = src[i + 1:open_paren]
                end = src.find(")" + delim + '"', open_paren)
                end = n if end < 0 else end + len(delim) + 2
                blank(i + 1, end - 1)
                i = end
                continue
            j = i + 1
            while j < n and src[j] != '"' and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
            continue
        if c == "'":
            # A digit separator (1'000'000, 0xFF'FF) is not a character literal.
            k = i
            while k > 0 and (src[k - 1].isalnum() or src[k - 1] in "_.'"):
                k -= 1
            if k < i and src[k].isdigit():
                i += 1
                continue
            j = i + 1
            while j < n and src[j] != "'" and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
            continue
        i += 1
    return "".join(out)


def collapse(text, open_ch, close_ch):
    """`text` with the inside of every balanced open_ch...close_ch group removed (an unclosed
    open_ch stays, with what follows it)."""
    inner = re.compile(re.escape(open_ch) + "[^" + re.escape(open_ch + close_ch) + "]*" +
                       re.escape(close_ch))
    while True:
        collapsed = inner.sub("\x01", text)
        if collapsed == text:
            return text.replace("\x01", open_ch + close_ch)
        text = collapsed


def strip_templates(text):
    """Removes `template <...>` heads (the parameter list may hold `class`)."""
    while True:
        m = re.search(r"\btemplate\s*<", text)
        if not m:
            return text
        depth = 0
        j = m.end() - 1
        while j < len(text):
            if text[j] == "<":
                depth += 1
            elif text[j] == ">":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        text = text[:m.start()] + " " + text[j + 1:]


TRAILING_QUALIFIER = re.compile(
    r"\s*(?:\bconst\b|\bvolatile\b|\bnoexcept\s*(?:\(\))?|\boverride\b|\bfinal\b|\bmutable\b|"
    r"\bconstexpr\b|\btry\b|&&|&)\s*$")


def paren_depth(text):
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
    return depth


def classify(head):
    """Kind of the brace that follows `head` outside any function body.

    Returns "ns" (namespace, extern "C"), "cls" (class/struct/union body), "fn" (function body),
    "init" (a brace-initialized member in a constructor's initializer list) or "blk" (anything
    else: enum bodies, aggregate initializers).
    """
    h = strip_templates(collapse(head, "{", "}"))
    flat = collapse(h, "(", ")")  # top-level text, argument lists emptied
    if re.search(r"\bnamespace\b", flat) or re.fullmatch(r'\s*extern\s*""\s*', flat):
        return "ns"
    if re.search(r"\benum\b", flat):
        return "blk"
    if paren_depth(h) > 0:
        # Inside an unclosed argument list (a macro or function call at namespace scope): a
        # lambda's body or a braced argument.
        return "fn" if re.search(r"[)\]]\s*(?:mutable\s*)?(?:->[^(){};]*)?$", h) else "blk"
    if re.search(r"(?:^|[\s>;])(?:class|struct|union)\b", flat) and "=" not in flat:
        return "cls"
    # A trailing return type (may hold parentheses: decltype) and a requires clause end at the
    # declarator's closing parenthesis.
    m = re.search(r"\)\s*(?:[\w&\s]*)->", h)
    if m:
        h = h[:m.start() + 1]
    m = re.search(r"\)[\w&\s]*\brequires\b", h)
    if m:
        h = h[:m.start() + 1]
    while True:
        stripped = TRAILING_QUALIFIER.sub("", h)
        if stripped == h:
            break
        h = stripped
    if h.rstrip().endswith(")"):  # a declarator, or a lambda's parameter list
        return "fn"
    if re.search(r"\]\s*$", h):  # `[] {` lambda without a parameter list
        return "fn"
    # A constructor's initializer list: `) : a_(x), b_{y} {` (the body) or `b_{` (a member).
    init = re.search(r"\)\s*:(?!:)", flat)
    if init:
        if re.search(r"[\w>]\s*$", h):
            return "init"
        return "fn"
    return "blk"


NAME_BEFORE_PARAMS = re.compile(
    r"((?:[A-Za-z_]\w*(?:<[^<>()]*>)?\s*::\s*)*(?:operator\s*(?:\(\s*\)|[^\s(\w][^\s(]*|\w+)|~?[A-Za-z_]\w*))"
    r"\s*$")


def function_name(head, classes):
    """The name of the function whose head (text before its body) is `head`."""
    h = strip_templates(collapse(head, "{", "}"))
    flat = collapse(h, "(", ")")
    if re.search(r"\]\s*(?:\(\))?\s*(?:mutable\s*)?(?:->[^{};]*)?$", flat) and \
            not re.search(r"\boperator\s*\[\]", flat):
        var = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*=\s*\[[^\]]*\]\s*(?:\(\))?[^=]*$",
                        flat)
        return "lambda " + var.group(1) if var else "lambda"
    # The declarator's parameter list is the first top-level '(' that follows a name, except for
    # `operator()` whose own parentheses come first.
    depth = 0
    for i, ch in enumerate(h):
        if ch == "(":
            if depth == 0:
                m = NAME_BEFORE_PARAMS.search(h[:i])
                if m and not re.fullmatch(r"\s*(?:decltype|alignas|__attribute__)\s*", m.group(1)):
                    name = re.sub(r"\s+", "", m.group(1))
                    if name.endswith("operator"):  # operator()(...): its own "()" came first
                        name += "()"
                    if re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", name) and name not in classes:
                        # A macro such as TEST(Suite, Name): its arguments name the function.
                        j, level = i, 0
                        while j < len(h):
                            level += {"(": 1, ")": -1}.get(h[j], 0)
                            if level == 0:
                                break
                            j += 1
                        args = re.sub(r"\s+", " ", h[i + 1:j]).strip()
                        return "%s(%s)" % (name, args)
                    if classes and "::" not in name:
                        name = "::".join(classes) + "::" + name
                    return name
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
    return "?"


# A line that is only a function-like macro invocation (`TS_INSTANTIATE_BINARY(Add)`, no ';'):
# it ends a declaration the way a ';' does.
MACRO_LINE = re.compile(r"^[ \t]*[A-Z][A-Z0-9_]*[ \t]*\([^\n]*\)[ \t]*;?[ \t]*\n", re.M)
# The text before a lambda's body, at the end of an expression: captures, parameters, specifiers.
LAMBDA_HEAD = re.compile(r"\[[^\[\]]*\]\s*(?:\(\))?\s*(?:mutable\s*)?(?:->[^{}();,]*)?$")


def head_after_macro_lines(src, start, end):
    """Start of the declaration text in src[start:end], past any macro-invocation lines."""
    last = None
    for m in MACRO_LINE.finditer(src, start, end):
        if src[m.end():end].strip():
            last = m.end()
    return start if last is None else last


def scan(path):
    """(lines, name line, name) of every function in the file at `path`."""
    with open(path, encoding="utf-8", errors="replace") as f:
        src = blank_non_code(f.read())
    line_of = []
    line = 1
    for ch in src:
        line_of.append(line)
        if ch == "\n":
            line += 1
    line_of.append(line)

    results = []
    # Open braces outside function bodies: [kind, offset of the '{', name]. Inside a function
    # body only the depth is tracked.
    stack = []
    head_start = 0  # where the declaration before the next brace starts (namespace/class scope)
    fn = None  # (offset of the '{', name, name line, is a lambda) of the open function body
    fn_depth = 0
    for pos, ch in enumerate(src):
        if fn_depth:
            if ch == "{":
                fn_depth += 1
            elif ch == "}":
                fn_depth -= 1
                if fn_depth == 0:
                    open_pos, name, name_line, is_lambda = fn
                    results.append((line_of[pos] - line_of[open_pos] + 1, name_line, name))
                    if not is_lambda:  # a lambda is part of an expression that goes on
                        head_start = pos + 1
            continue
        if ch == ";" and (not stack or stack[-1][0] in ("ns", "cls")):
            head_start = pos + 1
        elif ch == "{":
            in_initializer = stack and stack[-1][0] in ("blk", "init")
            if in_initializer:
                # Inside a braced initializer: a lambda's body or a nested initializer.
                text = collapse(collapse(src[stack[-1][1] + 1:pos], "(", ")"), "{", "}")
                kind = "fn" if LAMBDA_HEAD.search(text.rstrip()) else "blk"
                head = text
            else:
                head_start = head_after_macro_lines(src, head_start, pos)
                head = src[head_start:pos]
                kind = classify(head)
            if kind == "fn":
                classes = [f[2] for f in stack if f[0] == "cls" and f[2]]
                name = "lambda" if in_initializer else function_name(head, classes)
                name_pos = pos  # a lambda is reported where its body starts
                if not name.startswith("lambda"):
                    bare = re.split(r"[(\s]", name.split("::")[-1])[0]
                    m = re.search(r"\b" + re.escape(bare), head) if bare[:1].isalpha() else None
                    name_pos = head_start + (m.start() if m else len(head) - len(head.lstrip()))
                fn = (pos, name, line_of[name_pos], name.startswith("lambda"))
                fn_depth = 1
                continue
            name = ""
            if kind == "cls":
                m = re.search(r"\b(?:class|struct|union)\s+(?:\[\[[^\]]*\]\]\s*)?"
                              r"(?:alignas\s*\([^)]*\)\s*)?([A-Za-z_]\w*)",
                              strip_templates(collapse(head, "{", "}")))
                name = m.group(1) if m and m.group(1) != "final" else ""
            stack.append([kind, pos, name])
            if kind in ("ns", "cls"):
                head_start = pos + 1
        elif ch == "}":
            if not stack:
                head_start = pos + 1
                continue
            kind = stack.pop()[0]
            if kind in ("ns", "cls"):
                head_start = pos + 1
            # "init" and "blk" braces belong to the declaration that goes on after them: the head
            # keeps running.
    return results


def source_files(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        if not os.path.isdir(p):
            raise FileNotFoundError(p)
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith("build") and not d.startswith("."))
            for f in sorted(files):
                if f.endswith(EXTENSIONS):
                    yield os.path.join(root, f)


def main(argv):
    parser = argparse.ArgumentParser(
        description="List C++ functions longer than N lines (opening to closing brace).")
    parser.add_argument("paths", nargs="+", help="source files or folders")
    parser.add_argument("--over", type=int, default=None,
                        help="list functions longer than this (default: --max, else 150)")
    parser.add_argument("--max", type=int, default=None,
                        help="exit 1 when a function is longer than this")
    parser.add_argument("--all", action="store_true", help="list every function")
    args = parser.parse_args(argv)
    over = args.over if args.over is not None else (args.max if args.max is not None else 150)
    if args.all:
        over = 0

    rows = []
    try:
        for path in source_files(args.paths):
            for lines, line, name in scan(path):
                rows.append((lines, path, line, name))
    except FileNotFoundError as e:
        print("function_lengths: no such file or folder: %s" % e, file=sys.stderr)
        return 2
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    for lines, path, line, name in rows:
        if lines > over:
            print("%d %s:%d %s" % (lines, path, line, name))
    if args.max is not None and any(r[0] > args.max for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
