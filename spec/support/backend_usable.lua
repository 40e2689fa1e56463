-- `luajit spec/support/backend_usable.lua NAME`: exit 0 when the backend can run sandboxes here,
-- printing the image its conformance run uses (nothing for backends without images, after
-- making sure the test image is on the engine); else prints why (spec/run.sh skips its
-- conformance run with that reason).
package.path = "lua/?.lua;lua/?/init.lua;./?.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local backends = require "llmbox.backends"
local name = arg[1] or ""
local driver, err = backends.get(name)
if not driver then
    io.stdout:write(err, "\n")
    os.exit(1)
end
local ok, why = driver.usable()
if not ok then
    io.stdout:write(("backend %q is not usable here: %s\n"):format(driver.name, tostring(why)))
    os.exit(1)
end
if driver.name == "kubernetes" then
    -- the stand-in runs the host's /usr whatever the image; a real cluster needs the languages
    -- image in a registry its nodes reach (LLMBOX_K8S_IMAGE)
    io.stdout:write(os.getenv("LLMBOX_K8S_IMAGE") or "llmbox-spec-langs:latest", "\n")
    os.exit(0)
end
if driver.capabilities.images then
    local images = require "spec.support.busybox_image"
    local e = assert(require("llmbox.engine").connect(driver.name))
    local made, ierr = images.ensure_langs(e)
    if not made then
        io.stdout:write(("backend %q: the test image %s could not be made: %s\n"):format(driver.name,
            images.LANGS_IMAGE, tostring(ierr)))
        os.exit(1)
    end
    io.stdout:write(images.LANGS_IMAGE, "\n")
end
os.exit(0)
