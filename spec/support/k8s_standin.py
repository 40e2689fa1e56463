#!/usr/bin/python3
"""The Kubernetes stand-in (issue 17), first part: a loopback API server that speaks the
documented subset of the core/v1 API the kubernetes backend uses for pods, so the backend can be
tested where no cluster can run. Its honesty is checked by an official client
(python3-kubernetes) in spec/02-integration/k8s_standin_spec.lua.

    k8s_standin.py DIR

serves HTTPS on 127.0.0.1 (a free port) with a throwaway CA, and writes DIR/kubeconfig (context
"standin", namespace "sandboxes", the admin token) once it listens. Tokens: "admin-token" may do
everything, "reader-token" may only get and list (others are refused 403 as RBAC refuses them),
anything else is 401. Namespaces: default, sandboxes (others are 404).

Routes: GET /version, /api, /api/v1, /apis (discovery); pods in a namespace: POST (create), GET
(list, ?labelSelector=k=v[,k=v]), GET NAME, DELETE NAME. A created pod is Running and Ready at
once. Not here yet: watch, exec and attach, running anything (pods are records only).
"""
import base64
import datetime
import http.server
import json
import os
import socketserver
import ssl
import subprocess
import sys
import threading
import urllib.parse
import uuid

NAMESPACES = {"default", "sandboxes"}
TOKENS = {"admin-token": "admin", "reader-token": "reader"}
pods = {}  # (namespace, name) -> pod
lock = threading.Lock()


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    if details:
        body["details"] = details
    return code, body


def matches(pod, selector):
    labels = pod["metadata"].get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def running(pod):
    pod = json.loads(json.dumps(pod))
    md = pod.setdefault("metadata", {})
    md["uid"] = str(uuid.uuid4())
    md["creationTimestamp"] = now()
    md["resourceVersion"] = "1"
    pod.setdefault("spec", {})["nodeName"] = "standin"
    containers = pod["spec"].get("containers") or []
    pod["status"] = {
        "phase": "Running", "podIP": "10.0.0.2", "startTime": now(),
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now()}
                       for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
        "containerStatuses": [{"name": c.get("name"), "image": c.get("image", ""), "imageID": "", "ready": True,
                               "restartCount": 0, "started": True, "state": {"running": {"startedAt": now()}}}
                              for c in containers],
    }
    return pod


def handle(method, path, query, body, role):
    parts = [p for p in path.split("/") if p]
    if method == "GET" and path == "/version":
        return 200, {"major": "1", "minor": "28", "gitVersion": "v1.28.0-llmbox-standin", "platform": "linux/amd64"}
    if method == "GET" and path == "/api":
        return 200, {"kind": "APIVersions", "versions": ["v1"],
                     "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
    if method == "GET" and path == "/apis":
        return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
    if method == "GET" and path == "/api/v1":
        return 200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "pods", "singularName": "", "namespaced": True, "kind": "Pod",
             "verbs": ["create", "delete", "get", "list"], "shortNames": ["po"]}]}
    if len(parts) < 5 or parts[:3] != ["api", "v1", "namespaces"] or parts[4] != "pods" or len(parts) > 6:
        return status(404, "NotFound", "the server could not find the requested resource")
    ns, name = parts[3], (parts[5] if len(parts) == 6 else None)
    verb = {"POST": "create", "DELETE": "delete"}.get(method, "get" if name else "list")
    if role != "admin" and verb not in ("get", "list"):
        return status(403, "Forbidden", 'pods is forbidden: User "reader" cannot %s resource "pods" in API group "" '
                      'in the namespace "%s"' % (verb, ns), {"kind": "pods"})
    if ns not in NAMESPACES:
        return status(404, "NotFound", 'namespaces "%s" not found' % ns, {"name": ns, "kind": "namespaces"})
    with lock:
        if verb == "list":
            sel = query.get("labelSelector", [""])[0]
            items = [p for (pns, _), p in sorted(pods.items()) if pns == ns and matches(p, sel)]
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}
        if verb == "create":
            try:
                pod = json.loads(body or b"")
            except ValueError as e:
                return status(400, "BadRequest", "the pod is not JSON: %s" % e)
            pname = (pod.get("metadata") or {}).get("name")
            if not pname:
                return status(422, "Invalid", 'Pod "" is invalid: metadata.name: Required value: name or generateName '
                              'is required')
            containers = (pod.get("spec") or {}).get("containers") or []
            if not containers or any(not c.get("image") for c in containers):
                return status(422, "Invalid", 'Pod "%s" is invalid: spec.containers[0].image: Required value' % pname)
            if (ns, pname) in pods:
                return status(409, "AlreadyExists", 'pods "%s" already exists' % pname,
                              {"name": pname, "kind": "pods"})
            pod.setdefault("metadata", {})["namespace"] = ns
            pods[(ns, pname)] = running(pod)
            return 201, pods[(ns, pname)]
        pod = pods.get((ns, name))
        if pod is None:
            return status(404, "NotFound", 'pods "%s" not found' % name, {"name": name, "kind": "pods"})
        if verb == "delete":
            del pods[(ns, name)]
        return 200, pod


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def serve(self, method):
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        auth = self.headers.get("Authorization") or ""
        role = TOKENS.get(auth[len("Bearer "):]) if auth.startswith("Bearer ") else None
        if role is None:
            code, answer = status(401, "Unauthorized", "Unauthorized")
        else:
            code, answer = handle(method, url.path, urllib.parse.parse_qs(url.query), body, role)
        data = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.serve("GET")

    def do_POST(self):
        self.serve("POST")

    def do_DELETE(self):
        self.serve("DELETE")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    out = sys.argv[1]
    # a throwaway CA and a certificate for 127.0.0.1 signed by it
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(a, cwd=out, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=standin-ca", "-days", "2")
    with open(os.path.join(out, "san"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "req", *ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1")
    run("openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "srv.pem", "-days", "2", "-extfile", "san")
    srv = Server(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(out, "srv.pem"), os.path.join(out, "srv.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    ca = base64.b64encode(open(os.path.join(out, "ca.pem"), "rb").read()).decode()
    port = srv.server_address[1]
    config = """apiVersion: v1
kind: Config
current-context: standin
clusters:
- name: standin
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: admin-token
- name: reader
  user:
    token: reader-token
contexts:
- name: standin
  context: {cluster: standin, user: admin, namespace: sandboxes}
- name: reader
  context: {cluster: standin, user: reader, namespace: sandboxes}
""" % (port, ca)
    with open(os.path.join(out, "kubeconfig.part"), "w") as f:
        f.write(config)
    os.rename(os.path.join(out, "kubeconfig.part"), os.path.join(out, "kubeconfig"))
    srv.serve_forever()


if __name__ == "__main__":
    main()
