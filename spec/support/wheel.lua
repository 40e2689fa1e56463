-- Builds a tiny pure-Python wheel (PyPI is not reachable here): a zip with the module, METADATA,
-- WHEEL and a RECORD of sha256 hashes, as pip expects. Returns the directory holding it.
local _M = {}

function _M.build(dir, name, version, source)
    assert(name:match("^[%w_]+$") and version:match("^[%d.]+$"))
    local script = ([[
import base64, hashlib, os, sys, zipfile
d, name, ver, src = sys.argv[1:5]
files = {f"{name}/__init__.py": src.encode(),
         f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n".encode(),
         f"{name}-{ver}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: llmbox-spec\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
record = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},{len(b)}" for p, b in files.items()]
record.append(f"{name}-{ver}.dist-info/RECORD,,")
os.makedirs(d, exist_ok=True)
with zipfile.ZipFile(os.path.join(d, f"{name}-{ver}-py3-none-any.whl"), "w") as z:
    for p, b in files.items():
        z.writestr(p, b)
    z.writestr(f"{name}-{ver}.dist-info/RECORD", "\n".join(record) + "\n")
]])
    local q = require("spec.helpers").shell_quote
    local ok = os.execute("/usr/bin/python3 -c " .. q(script) .. " " .. q(dir) .. " " .. q(name) .. " "
        .. q(version) .. " " .. q(source) .. " && chmod -R a+rX " .. q(dir))
    assert(ok == 0 or ok == true, "building the wheel failed")
    return dir
end

return _M
