"""Prints a bash script of about N file commands, from a fixed seed:
redirects (>, >>, 2>, <), pipes, cat, grep, wc, sort, cp, mv, ln, rm,
mkdir, touch, chmod, and subshells, over a small tree in the current
directory. Its output depends only on what the files hold, so the same
script run on two file systems must print the same and leave the same
tree (tests/multiproc/programs.sh)."""

import random
import sys


def main() -> None:
    n = int(sys.argv[1])
    rng = random.Random(32)
    files = [f"f{i}" for i in range(12)]
    dirs = ["d0", "d1", "d2/e"]
    out = ["set -e", "mkdir -p d0 d1 d2/e", "for f in " + " ".join(files) + "; do : > $f; done"]
    words = ["alpha", "beta", "gamma", "delta", "pm", "amber", "fsync", "zone"]
    for i in range(n):
        f, g = rng.choice(files), rng.choice(files)
        d = rng.choice(dirs)
        w = rng.choice(words)
        k = rng.randrange(12)
        out.append(rng.choice([
            f"echo '{w} {i}' >> {f}",
            f"printf '%s\\n' {w} {w}{i} > {f}",
            f"cat {f} {g} | sort | uniq -c | sort -n > {d}/u{k}",
            f"grep -c '{w}' {f} || true",
            f"wc -l < {f}",
            f"cp {f} {d}/c{k}",
            f"cat {f} | tr a-z A-Z >> {g}",
            f"(cd {d} && ls | sort | tr '\\n' ' '; echo)",
            f"mv {d}/c{k} {d}/m{k} 2>/dev/null || echo no c{k} in {d}",
            f"ln -f {f} {d}/h{k}",
            f"rm -f {d}/u{k}",
            f"head -c 100 {f} | od -c | tail -n 2",
            f"seq {k} {k + 20} | paste -sd+ | bc > {d}/s{k} 2>/dev/null || seq {k} {k + 20} > {d}/s{k}",
            f"chmod {rng.choice(['600', '640', '755'])} {f}",
            f"touch {d}/t{k}; stat -c '%s %a' {d}/t{k}",
            f"ls {d} nonexistent 2> {d}/err{k} | sort | head -3 || true",
            f"sort -r {f} > tmp.$$ && mv tmp.$$ {f}",
            f"while read -r line; do echo \"$line\" | rev; done < {f} | tail -n 2",
        ]))
    out.append("find . -type f | sort | xargs md5sum")
    print("\n".join(out))


if __name__ == "__main__":
    main()
