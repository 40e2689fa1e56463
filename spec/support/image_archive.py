#!/usr/bin/python3
"""Image archives for the specs of images without a daemon, made offline from a root
filesystem's tar (spec/support/python_image.py's) and two small layers around it:

    layer 0   /usr/local/share/t/old.txt, /usr/local/share/t/dir/a.txt
    layer 1   the root filesystem (gzip-compressed in the OCI formats)
    layer 2   whiteouts: old.txt removed, dir/ emptied (opaque), then dir/b.txt and new.txt

    image_archive.py ROOTFS.tar docker-archive OUT.tar   as `docker save` writes it
    image_archive.py ROOTFS.tar oci OUT_DIR              an OCI image layout
    image_archive.py ROOTFS.tar oci-archive OUT.tar      that layout as a tar
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile


def small_layer(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                t.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o644
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def layers(rootfs_tar):
    with open(rootfs_tar, "rb") as f:
        root = f.read()
    t = "usr/local/share/t"
    first = small_layer([(t, None), (t + "/old.txt", b"old\n"), (t + "/dir", None), (t + "/dir/a.txt", b"a\n")])
    last = small_layer([(t + "/.wh.old.txt", b""), (t + "/dir/.wh..wh..opq", b""), (t + "/dir/b.txt", b"b\n"),
                        (t + "/new.txt", b"from the last layer\n")])
    return [first, root, last]


def config(diff_ids):
    return json.dumps({"architecture": "amd64", "os": "linux",
                       "config": {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]},
                       "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()


def sha(data):
    return hashlib.sha256(data).hexdigest()


def add(t, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    t.addfile(info, io.BytesIO(data))


def docker_archive(rootfs_tar, out):
    ls = layers(rootfs_tar)
    cfg = config(["sha256:" + sha(l) for l in ls])
    with tarfile.open(out, "w") as t:
        names = []
        for l in ls:
            name = sha(l) + "/layer.tar"
            add(t, name, l)
            names.append(name)
        add(t, sha(cfg) + ".json", cfg)
        add(t, "manifest.json", json.dumps([{"Config": sha(cfg) + ".json", "RepoTags": ["llmbox-test:1"],
                                             "Layers": names}]).encode())


def oci_layout(rootfs_tar, out):
    ls = layers(rootfs_tar)
    blobs = os.path.join(out, "blobs", "sha256")
    os.makedirs(blobs)

    def put(data):
        with open(os.path.join(blobs, sha(data)), "wb") as f:
            f.write(data)
        return {"digest": "sha256:" + sha(data), "size": len(data)}

    stored = [ls[0], gzip.compress(ls[1], compresslevel=1, mtime=0), ls[2]]
    media = ["application/vnd.oci.image.layer.v1.tar", "application/vnd.oci.image.layer.v1.tar+gzip",
             "application/vnd.oci.image.layer.v1.tar"]
    cfg = put(config(["sha256:" + sha(l) for l in ls]))
    cfg["mediaType"] = "application/vnd.oci.image.config.v1+json"
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "config": cfg,
                "layers": [dict(put(d), mediaType=m) for d, m in zip(stored, media)]}
    m = put(json.dumps(manifest).encode())
    m["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [m]}, f)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)


def main():
    rootfs_tar, fmt, out = sys.argv[1:4]
    if fmt == "docker-archive":
        docker_archive(rootfs_tar, out)
    elif fmt == "oci":
        oci_layout(rootfs_tar, out)
    elif fmt == "oci-archive":
        tmp = out + ".layout"
        oci_layout(rootfs_tar, tmp)
        with tarfile.open(out, "w") as t:
            for name in sorted(os.listdir(tmp)):
                t.add(os.path.join(tmp, name), arcname=name)
        shutil.rmtree(tmp)
    else:
        sys.exit("image_archive.py: unknown format " + fmt)


if __name__ == "__main__":
    main()
