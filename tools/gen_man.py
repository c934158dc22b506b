#!/usr/bin/env python3
"""The API reference as man pages, written from include/cudaev.h's comments:
one page per cudaev_ function (section 3) and an overview, cudaev(7).

  gen_man.py HEADER --list                          names of the pages (for meson)
  gen_man.py HEADER OUTDIR [--version V]            write the pages
  gen_man.py HEADER --check MANDIR [--library LIB]  the `man` unit test

The header's layout is the format:
  - `/* ---- title ---- */` starts a section;
  - a comment directly above a declaration (no blank line between)
    documents it, and declarations that follow without a blank line share
    it (cudaev_future_set_user / cudaev_future_user);
  - a comment followed by a blank line is about the whole section
    (the GPU completion sources' common rules) and goes on each of its
    pages;
  - in a comment, a blank line starts a paragraph, "- " starts a list
    item, and an indented paragraph is kept as it is laid out;
  - `//` comments and `/** */` are read too; inline function bodies are not.
Writing pages never fails on the header's content (the build goes on);
--check fails for a function without a comment of its own, and for any
exported cudaev_ function without a page (or declared but not exported).
"""
import argparse
import os
import re
import subprocess
import sys

FUNC = re.compile(r"\b(cudaev_\w+)\s*\(")
TYPEDEF = re.compile(r"^typedef\b.*?(?:\(\s*\*\s*(\w+)\s*\)|(\w+)\s*;)", re.S)
DEFINE = re.compile(r"^#\s*define\s+(\w+)")


class Decl:
    def __init__(self, kind, name, text, line):
        self.kind, self.name, self.text, self.line = kind, name, text, line
        self.doc = None  # the Group's comment lines
        self.section = None


class Section:
    def __init__(self, title):
        self.title = title
        self.intro = []  # comments about the whole section (lists of lines)
        self.decls = []


def comment_lines(block):
    """The text of a /* */ comment, line by line, with the comment markers
    removed and any indentation beyond them kept."""
    out = []
    for i, line in enumerate(block):
        s = line.rstrip()
        if i == len(block) - 1:
            s = s[: s.rfind("*/")].rstrip() if "*/" in s else s
        st = s.lstrip()
        if i == 0:
            st = st[2:].lstrip("*!")  # "/*", "/**", "/*!"
        elif st.startswith("*"):
            st = st[1:]
        else:
            st = s  # a line of a comment without the leading " *"
        out.append(st[1:] if st.startswith(" ") else st)
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def parse(path):
    """(overview comment lines, [Section], [Decl]) of the header."""
    src = open(path).read().splitlines()
    events = []  # (kind, payload, line number)
    i = 0
    while i < len(src):
        line, st = src[i], src[i].strip()
        n = i + 1
        if not st or st in ('extern "C" {', "}"):
            events.append(("blank" if not st else "skip", None, n))
            i += 1
        elif st.startswith("//"):
            block = []
            while i < len(src) and src[i].strip().startswith("//"):
                block.append(src[i].strip()[2:].lstrip("/"))
                i += 1
            lines = [l[1:] if l.startswith(" ") else l for l in block]
            events.append(("comment", [l for l in lines], n))
        elif st.startswith("/*"):
            block, rest = [line], st[2:]
            while "*/" not in rest and i + 1 < len(src):  # ends at the first "*/"
                i += 1
                block.append(src[i])
                rest = src[i]
            i += 1
            m = re.match(r"/\*\s*-{2,}\s*(.*?)\s*-+\s*\*/$", st)
            if len(block) == 1 and m:
                events.append(("section", m.group(1), n))
            else:
                events.append(("comment", comment_lines(block), n))
        elif st.startswith("#"):
            text = st
            while text.endswith("\\") and i + 1 < len(src):
                i += 1
                text = text[:-1] + " " + src[i].strip()
            i += 1
            m = DEFINE.match(text)
            if m and m.group(1).startswith("CUDAEV_") and m.group(1) != "CUDAEV_H":
                events.append(("decl", Decl("macro", m.group(1), text, n), n))
            else:
                events.append(("skip", None, n))
        else:
            text = [line]
            while not re.search(r";\s*(/\*.*\*/)?\s*$", src[i]) and i + 1 < len(src):
                i += 1
                text.append(src[i])
            i += 1
            joined = "\n".join(text)
            code = re.sub(r"/\*.*?\*/", "", joined, flags=re.S).rstrip()
            if code.lstrip().startswith("typedef"):
                m = TYPEDEF.match(code.strip())
                name = (m.group(1) or m.group(2)) if m else None
                events.append(("decl", Decl("type", name, code, n), n))
            elif FUNC.search(code) and "(" in code:
                events.append(("decl", Decl("func", FUNC.search(code).group(1), code, n), n))
            else:
                events.append(("skip", None, n))  # forward declarations

    overview, sections, decls = [], [Section("")], []
    doc, prev = None, None  # the open group's comment; the previous event
    for k, (kind, payload, n) in enumerate(events):
        nxt = events[k + 1][0] if k + 1 < len(events) else None
        if kind == "comment":
            if not overview and not decls and len(sections) == 1 and not sections[0].intro:
                overview = payload  # the file's own comment
                doc = None
            elif nxt == "decl":
                doc = payload
            else:
                sections[-1].intro.append(payload)
                doc = None
        elif kind == "section":
            sections.append(Section(payload))
            doc = None
        elif kind == "blank":
            doc = None
        elif kind == "decl":
            d = payload
            if doc is None and prev == "decl" and decls and decls[-1].doc is not None:
                doc = decls[-1].doc  # joins the group above
            d.doc = doc
            d.section = sections[-1]
            sections[-1].decls.append(d)
            decls.append(d)
        prev = kind if kind != "skip" else prev
    return overview, [s for s in sections if s.decls or s.intro], decls


# ---- roff ------------------------------------------------------------------


def esc(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + s if s[:1] in (".", "'") else s


def mark_names(s, funcs):
    """In escaped text: the names of functions in bold, `code` in italics."""
    def bold(m):
        return "\\fB%s\\fR" % m.group(0) if m.group(0) in funcs else m.group(0)
    s = re.sub(r"`([^`]+)`", r"\\fI\1\\fR", s)
    return re.sub(r"\bcudaev_\w+", bold, s)


def paragraphs(lines, funcs):
    """roff for a comment: paragraphs, "- " list items, indented blocks as laid out."""
    out, blocks, cur = [], [], []
    for l in lines:
        if l.strip():
            cur.append(l)
        elif cur:
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    for b in blocks:
        indent = len(b[0]) - len(b[0].lstrip())
        if indent and not b[0].lstrip().startswith("- "):
            out.append(".PP\n.nf")
            out.extend(mark_names(esc(l[indent:] if l[:indent].isspace() else l.lstrip()), funcs)
                       for l in b)
            out.append(".fi")
            continue
        mode = None  # "text" or "item"
        for l in b:
            st = l.strip()
            if st.startswith("- "):
                out.append(".IP \\(bu 2")
                st, mode = st[2:], "item"
            elif mode is None or (mode == "item" and len(l) - len(l.lstrip()) == 0):
                out.append(".PP")
                mode = "text"
            out.append(mark_names(esc(st), funcs))
    return out


def plain(s):
    """Escaped text without markup (NAME lines are read by whatis)."""
    return esc(s.replace("`", ""))


def summary(lines):
    """The doc comment's first sentence, for NAME and the overview."""
    text = " ".join(l.strip() for l in lines if l.strip())
    depth = 0
    for i, c in enumerate(text):
        depth += c in "([" and 1 or c in ")]" and -1 or 0
        if c == "." and depth <= 0 and (i + 1 == len(text) or text[i + 1] == " "):
            word = text[:i].rsplit(" ", 1)[-1]
            if word.lower() in ("e.g", "i.e", "etc", "cf", "vs"):
                continue
            return text[:i]
    return text


def header(name, sec, version):
    return [
        '.\\" Written by tools/gen_man.py from include/cudaev.h: edit the header, not this page.',
        '.TH %s %s "" "%s" "cudaev Manual"' % (name, sec, ("cudaev " + version).strip()),
        ".nh",  # names like cudaev_loop_destroy must not be hyphenated
        ".ad l",
    ]


def synopsis(decls):
    out = [".SH SYNOPSIS", ".nf", ".B #include <cudaev.h>", ".PP"]
    for d in decls:
        out.extend(esc(l) for l in d.text.splitlines())
    out += [".fi", ".PP", "Link with", ".IR \\-lcudart", "(pkg\\-config \\-\\-libs cudaev)."]
    return out


def func_page(d, groups, funcs, version):
    group = groups[id(d.doc)] if d.doc is not None else [d]
    names = [g.name for g in group if g.kind == "func"]
    lines = header(d.name, 3, version)
    doc = d.doc or []
    lines += [".SH NAME", "%s \\- %s" % (", ".join(names), plain(summary(doc)) if doc else "undocumented")]
    lines += synopsis(group)
    lines += [".SH DESCRIPTION"]
    lines += paragraphs(doc, funcs) if doc else ["Not documented in cudaev.h yet."]
    for intro in d.section.intro:
        lines += ['.SS "Common to all %s"' % esc(d.section.title)] + paragraphs(intro, funcs)
    refs = []
    for l in doc:
        for m in re.finditer(r"\bcudaev_\w+", l):
            if m.group(0) in funcs and m.group(0) not in names and m.group(0) not in refs:
                refs.append(m.group(0))
    lines += [".SH SEE ALSO"]
    lines += [".BR %s (3)," % r for r in refs] + [".BR cudaev (7)"]
    return "\n".join(lines) + "\n"


def overview_page(overview, sections, funcs, version):
    lines = header("cudaev", 7, version)
    title = overview[0] if overview else "cudaev"
    lines += [".SH NAME", "cudaev \\- %s" % esc(title.split(":", 1)[-1].strip().rstrip("."))]
    lines += [".SH SYNOPSIS", ".nf", ".B #include <cudaev.h>", ".fi", ".PP",
              "Link with", ".IR \\-lcudart", "(pkg\\-config \\-\\-libs cudaev)."]
    lines += [".SH DESCRIPTION"] + paragraphs(overview[1:], funcs)
    for s in sections:
        if not s.title:
            continue
        lines += ['.SH "%s"' % esc(s.title.upper())]
        for intro in s.intro:
            lines += paragraphs(intro, funcs)
        for d in s.decls:
            if d.kind == "func":
                lines += [".TP", ".BR %s (3)" % d.name, mark_names(esc(summary(d.doc)), funcs) if d.doc else "Undocumented."]
            elif d.doc is not None or d.kind == "macro":
                lines += [".TP", ".B %s" % d.name]
                lines += [mark_names(esc(summary(d.doc)), funcs) if d.doc else esc(d.text)]
    lines += [".SH SEE ALSO", "docs/design.md and README.md in cudaev's source tree."]
    return "\n".join(lines) + "\n"


def pages(path, version):
    overview, sections, decls = parse(path)
    funcs = [d.name for d in decls if d.kind == "func"]
    groups = {}
    for d in decls:
        if d.doc is not None:
            groups.setdefault(id(d.doc), []).append(d)
    out = {"cudaev.7": overview_page(overview, sections, set(funcs), version)}
    for d in decls:
        if d.kind == "func":
            out[d.name + ".3"] = func_page(d, groups, set(funcs), version)
    return out, decls


def exported(lib):
    nm = os.environ.get("NM", "nm")
    p = subprocess.run([nm, "-D", "--defined-only", lib], capture_output=True, text=True, check=True)
    return {l.split()[2].split("@")[0] for l in p.stdout.splitlines()
            if len(l.split()) == 3 and l.split()[2].startswith("cudaev_")}


def check(path, mandir, lib):
    errors, warnings = [], []
    _, _, decls = parse(path)
    funcs = [d for d in decls if d.kind == "func"]
    rel = os.path.basename(path)
    for d in funcs:
        if d.doc is None:
            errors.append("%s:%d: %s has no doc comment: write one directly above its "
                          "prototype (no blank line between; include/cudaev.h's rules)"
                          % (rel, d.line, d.name))
        elif not any("Thread:" in l for l in d.doc) and \
                not any("Thread:" in l for c in d.section.intro for l in c):
            warnings.append("%s:%d: %s: the comment says no \"Thread:\" (HOUSE_STYLE 5)"
                            % (rel, d.line, d.name))
    names = {d.name for d in funcs}
    if lib:
        exp = exported(lib)
        for n in sorted(exp - names):
            errors.append("%s is exported by %s but not declared in %s, so it has no page"
                          % (n, os.path.basename(lib), rel))
        for n in sorted(names - exp):
            errors.append("%s is declared in %s but not exported by %s" % (n, rel, os.path.basename(lib)))
        names |= exp
    for n in sorted(names):
        if not os.path.isfile(os.path.join(mandir, n + ".3")):
            errors.append("no page %s.3 in %s (ninja -C BUILD man)" % (n, mandir))
    if not os.path.isfile(os.path.join(mandir, "cudaev.7")):
        errors.append("no page cudaev.7 in %s" % mandir)
    for w in warnings:
        print("gen_man: warning: " + w)
    for e in errors:
        print("gen_man: " + e)
    print("gen_man: %d functions in %s, %d pages checked%s" % (
        len(funcs), rel, len(names) + 1, " against " + lib if lib else ""))
    print("%d passed, %d failed" % (0 if errors else 1, 1 if errors else 0))
    return 1 if errors else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("header")
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--check", metavar="MANDIR")
    ap.add_argument("--library")
    ap.add_argument("--version", default="")
    a = ap.parse_args()
    if a.check:
        return check(a.header, a.check, a.library)
    out, decls = pages(a.header, a.version)
    if a.list:
        print("\n".join(sorted(out)))
        return 0
    if not a.outdir:
        ap.error("OUTDIR, --list or --check")
    os.makedirs(a.outdir, exist_ok=True)
    for name, text in out.items():
        with open(os.path.join(a.outdir, name), "w") as f:
            f.write(text)
    for d in decls:
        if d.kind == "func" and d.doc is None:
            print("gen_man: warning: %s has no doc comment (the `man` test fails)" % d.name,
                  file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
