"""A tiny llmbox_client example: a session, a file in, a plot out, a command, a one-shot run,
and an error from the daemon. The plots are saved in the current directory.

    llmbox serve --listen unix:/tmp/llmbox.sock &
    LLMBOX_SERVER=unix:/tmp/llmbox.sock python3 example.py
"""
import os
import tempfile

from llmbox_client import LlmboxError, SandboxSession, run

with SandboxSession(lang="python") as session, tempfile.TemporaryDirectory() as tmp:
    data = os.path.join(tmp, "squares.csv")
    with open(data, "w") as f:
        f.write("".join(f"{i},{i * i}\n" for i in range(1, 6)))
    session.copy_to_runtime(data, "/sandbox/squares.csv")

    result = session.run(
        "import csv\n"
        "import matplotlib.pyplot as plt\n"
        "rows = [tuple(map(int, r)) for r in csv.reader(open('squares.csv'))]\n"
        "print('sum of squares:', sum(y for _, y in rows))\n"
        "plt.plot(*zip(*rows)); plt.show()\n"
    )
    print(result.stdout, end="")
    for i, plot in enumerate(result.plots):
        plot.save(f"plot{i}.{plot.format}")
        print(f"saved plot{i}.{plot.format} ({plot.width}x{plot.height})")

    print(session.execute_command("ls -l /sandbox").stdout, end="")

print(run("echo one-shot: $((6 * 7))", lang="shell").stdout, end="")

try:
    run("print(1)", lang="cobol")
except LlmboxError as e:
    print(f"refused: {e.status} {e.code}: {e.message}")
