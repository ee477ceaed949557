#!/usr/bin/env python3
"""Regenerates w3lib_reference.jsonl: outputs of the real w3lib.url.canonicalize_url.

The urlseen-canon `w3lib` profile is a port of w3lib 2.5.0; the Rust test
`crates/canon/tests/w3lib_reference.rs` replays this file. Run with w3lib 2.5.0 installed:

    python3 -m venv /tmp/w3env && /tmp/w3env/bin/pip install w3lib==2.5.0
    /tmp/w3env/bin/python data/canon/gen_w3lib_reference.py > data/canon/w3lib_reference.jsonl

Optional arguments SEED COUNT draw another sample (e.g. `... 7 40000 > /tmp/big.jsonl`) for a
larger one-off comparison. The committed file was made with CPython 3.11.7. No generated host is
an IPv4-mapped IPv6 address, whose text differs between CPython versions.

Each line: {"in": URL, "blank": keep_blank_values, "frag": keep_fragments,
            "out": canonical URL} or {..., "err": exception class name}.
Inputs are drawn from a fixed seed, so the file only changes when this script or w3lib does.
"""

import json
import random
import sys

import w3lib
from w3lib.url import canonicalize_url

assert w3lib.__version__ == "2.5.0", w3lib.__version__

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 20240601
COUNT = int(sys.argv[2]) if len(sys.argv) > 2 else 2500
rng = random.Random(SEED)

SCHEMES = ["http", "https", "HTTP", "ftp", "ws", "file", "mailto", "foo", "sftp", ""]
HOST_LABELS = [
    "www", "example", "EXAMPLE", "com", "co", "uk", "a-b", "xn--bcher-kva", "bücher", "Bücher",
    "例え", "テスト", "кто", "рф", "straße", "ＡＢＣ", "ñ", "", "1", "255", "0x10", "x" * 64,
    "ΑΣ", "İstanbul", "ǅ", "ﬁ", "①", "Å", "ℌ", "ｘｎ--abc", "x\u200dy", "\u00ad", "عربي", "aع",
    "ĳ", "㎏", "ẞ", "ς", "xn--ü",
]
SEGMENTS = [
    "a", "B", "index.html", ".", "..", "%2e", "%2E%2e", "%25", "%2525", "%2f", "%2F", "%3b",
    "%3F", "%41", "%7e", "%7E", "%c3%a9", "%e9", "%zz", "%", "%4", "résumé", "a b", "a+b",
    "x;y", ";p", "[x]", "a|b", "~u", "a%20b", "café", "\\", "a\\b", "", "!$&'()*+,=:@",
    "\"<>`{}^",
]
QUERY_PARTS = [
    "a=1", "b=2", "B=1", "a=", "a", "", "q=a+b", "q=a%20b", "q=a b", "k=%7e", "k=%2B",
    "x=%c3%a9", "x=é", "utm_source=x", "z=1;y=2", "c=3&c=1", "=v", "==", "k=v=w", "%41=1",
    "k='x'", "k=%", "k=%zz", "e=€",
]


def host():
    kind = rng.random()
    if kind < 0.08:
        return rng.choice(["[::1]", "[::0:1]", "[2001:0DB8::1]", "[v1.x]", "[1.2.3.4]", "[::1",
                           "[fe80::1%eth0]", "[xyz]"])
    if kind < 0.12:
        return rng.choice(["1.2.3.4", "3279880203", "0x7f.1", "256.1.1.1"])
    labels = [rng.choice(HOST_LABELS) for _ in range(rng.randint(1, 4))]
    return ".".join(labels)


def url():
    parts = []
    scheme = rng.choice(SCHEMES)
    if scheme:
        parts.append(scheme + ":")
    if rng.random() < 0.9:
        parts.append(rng.choice(["//", "//", "//", "/", "///", "\\\\", ""]))
        if rng.random() < 0.15:
            parts.append(rng.choice(["user", "UsEr:PaSs", "u%40x:p", "ü:ß", "a:b:c"]) + "@")
        parts.append(host())
        if rng.random() < 0.2:
            parts.append(rng.choice([":", ":80", ":8080", ":0080", ":99999", ":x"]))
    for _ in range(rng.randint(0, 4)):
        parts.append(rng.choice(["/", "/", "/", "\\", "//"]))
        parts.append(rng.choice(SEGMENTS))
    if rng.random() < 0.6:
        parts.append("?")
        parts.append(rng.choice(["&", ";"]).join(rng.choice(QUERY_PARTS)
                                                 for _ in range(rng.randint(0, 4))))
    if rng.random() < 0.3:
        parts.append("#" + rng.choice(["", "frag", "a b", "é", "x#y", "%23"]))
    u = "".join(parts)
    if rng.random() < 0.1:
        u = rng.choice([" ", "\t", "\x01"]) + u + rng.choice([" ", "\n", ""])
    if rng.random() < 0.05:
        i = rng.randint(0, len(u))
        u = u[:i] + rng.choice(["\t", "\n", "\r"]) + u[i:]
    return u


def main():
    seen = set()
    for n in range(COUNT):
        u = url()
        blank = n % 5 != 1
        frag = n % 7 == 3
        if (u, blank, frag) in seen or not u.strip("".join(chr(c) for c in range(33))):
            continue
        seen.add((u, blank, frag))
        rec = {"in": u, "blank": blank, "frag": frag}
        try:
            rec["out"] = canonicalize_url(u, keep_blank_values=blank, keep_fragments=frag)
        except Exception as e:  # noqa: BLE001 - the class name is the expected outcome
            rec["err"] = type(e).__name__
        sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
