#!/usr/bin/python3
"""Writes fuzz_fsconf_walk's seed corpus (guest-agent/fuzz/corpus): a byte
choosing the flags (fsconf_combos.h), then NUL-separated the targets of the
symlinks l0, d/l1, d/s/l2, d/s/t/l3 ("": none) and the path. Run with
/usr/bin/python3; the output is committed."""
import pathlib

out = pathlib.Path(__file__).resolve().parent / "corpus"


def seed(combo, links, path):
    links = (links + ["", "", "", ""])[:4]
    return bytes([combo]) + b"\0".join(x.encode() for x in links + [path])


seeds = {
    "plain": seed(0, [], "d/f"),
    "dotdot_out": seed(0, [], "../out/secret"),
    "link_up": seed(0, [".."], "l0/out/secret"),
    "link_up_in": seed(0, ["", "../d/s"], "d/l1/t"),
    "link_abs": seed(0, ["/etc"], "l0/passwd"),
    "link_chain": seed(0, ["d/l1", "s/l2", "t/l3", "../../f"], "l0"),
    "loop": seed(0, ["l0"], "l0/x"),
    "nofollow_last": seed(1, ["d"], "l0"),
    "dir_on_file": seed(3, ["d/f"], "l0/"),
    "no_symlinks": seed(5, ["", "s"], "d/l1/t"),
    "xdev": seed(6, [], "d/s/t/.."),
    "dots": seed(2, ["./../d/./f"], "e/../l0"),
    "slashes": seed(4, ["d//s///"], "l0//t/"),
    "climb_in_link": seed(0, ["", "", "../../../..", ""], "d/s/l2/root/d/f"),
    "empty_path": seed(0, [], ""),
    "trailing_dotdot": seed(0, ["", "", "", "../../../../out"], "d/s/t/l3/secret"),
    # the kernel's -EAGAIN when a rename elsewhere raced the "..": retried
    "climb_out_eagain": seed(0, ["", "", "../../../..", ""], "d/s/l2"),
}
out.mkdir(exist_ok=True)
for name, data in seeds.items():
    (out / name).write_bytes(data)
