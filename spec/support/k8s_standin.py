#!/usr/bin/python3
"""The Kubernetes stand-in (issue 17): a loopback API server that speaks the documented subset of
the core/v1 API the kubernetes backend uses for pods, so the backend can be tested where no
cluster can run. Its honesty is checked by the official clients (python3-kubernetes, kubectl) in
spec/02-integration/k8s_standin_spec.lua.

    k8s_standin.py DIR      (K8S_STANDIN_PROTOCOLS: the websocket subprotocols it speaks; default v5 and v4)

serves HTTPS on 127.0.0.1 (a free port) with a throwaway CA, and writes DIR/kubeconfig (context
"standin", namespace "sandboxes", the admin token) once it listens. Tokens: "admin-token" may do
everything, "reader-token" may only get and list (others are refused 403 as RBAC refuses them),
anything else is 401. Namespaces: default, sandboxes (others are 404).

Routes: GET /version, /api, /api/v1, /apis (discovery); pods in a namespace: POST (create), GET
(list, ?labelSelector=k=v[,k=v], ?fieldSelector= on metadata.name, metadata.namespace or
status.phase; ?watch=true: ADDED, MODIFIED and DELETED events as they happen),
GET NAME, DELETE NAME, and NAME/exec and NAME/attach upgraded to a stream protocol
(k8s_streams.py): a websocket (v5.channel.k8s.io or v4.channel.k8s.io, as the client prefers) or
SPDY/3.1 (v4.channel.k8s.io: kubectl before 1.30); each one's protocol is a line in the log
(stderr). networking.k8s.io/v1 networkpolicies in a namespace (create, get, list, delete: records
only, the pods here have no network to cut); configmaps in a namespace (create, get, list,
delete; data and binaryData), which a pod's configMap volumes show read-only (files of
defaultMode, else 0644); a pod whose configMap is missing stays Pending (ContainerCreating), as
a kubelet leaves it.

A pod is a session of llmbox's native backend (k8s_pods.py, k8s_pod.lua: the host's /usr stands
in for the image), with the pod's memory limit, its container's environment and the sizes of
its emptyDir volumes at /sandbox and /tmp; it is Running and Ready once its sandbox is.
Execs run in it side by side, as a container runtime runs them; stdin streams in as it comes
(through a FIFO the pod sees at /run/standin), ended by websocket v5's close of stdin, SPDY's end
of the stdin stream or, on websocket v4, the connection's end. The container's command (with
its args) is the pod's main process, run from the pod's start: attach streams its output from
then on and gives it the attached client's stdin when the container has stdin: true
(stdinOnce: the client's end of stdin ends it); when it ends, the pod is Succeeded or Failed
(restartPolicy Never) and the watches get MODIFIED. Not here: terminals, logs, an image's own
entrypoint.
"""
import base64
import datetime
import hashlib
import http.server
import json
import os
import queue
import shutil
import signal
import tempfile
import atexit
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

from k8s_pods import Agent, Feed, Main
from k8s_streams import SpdyChannels, WebSocketChannels

NAMESPACES = {"default", "sandboxes"}
TOKENS = {"admin-token": "admin", "reader-token": "reader"}
pods = {}  # (namespace, name) -> pod
agents = {}  # (namespace, name) -> Agent
netpols = {}  # (namespace, name) -> NetworkPolicy
configmaps = {}  # (namespace, name) -> ConfigMap
mains = {}  # (namespace, name) -> Main: the pod's main process
watchers = []  # (namespace, selector, queue.Queue) of the open watches of pods
HERE = os.path.dirname(os.path.abspath(__file__))
# the exec subprotocols spoken (K8S_STANDIN_PROTOCOLS="v4.channel.k8s.io": an API server before 1.30)
SPOKEN = (os.environ.get("K8S_STANDIN_PROTOCOLS") or "v5.channel.k8s.io,v4.channel.k8s.io").split(",")
ROOT = os.path.dirname(os.path.dirname(HERE))
UNITS = {"Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "K": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "": 1}


def quantity(text):
    for unit in ("Ki", "Mi", "Gi", "K", "M", "G", ""):
        if text.endswith(unit) and text[:len(text) - len(unit)].isdigit():
            return int(text[:len(text) - len(unit)]) * UNITS[unit]
    return 0



lock = threading.Lock()


def ended(ns, name, agent, code):
    """A pod's main process ended: the pod too (restartPolicy Never), and the watches are told."""
    with lock:
        pod = pods.get((ns, name))
        if pod is not None and agents.get((ns, name)) is agent:
            pods[(ns, name)] = terminated(pod, code)
            notify(ns, "MODIFIED", pods[(ns, name)])


def log(line):
    """A line in the stand-in's log (its stderr): which protocol each exec and attach spoke."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def flag(query, name):
    return query.get(name, ["false"])[0].lower() in ("true", "1")


def exit_status(code, message):
    """The Status of a command's end on the error channel: Success, or its exit code."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure", "message": message, "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def terminated(pod, code):
    """A pod whose main process ended with code."""
    pod = json.loads(json.dumps(pod))
    md = pod["metadata"]
    md["resourceVersion"] = str(int(md.get("resourceVersion", "1")) + 1)
    st = pod["status"]
    st["phase"] = "Succeeded" if code == 0 else "Failed"
    st["conditions"] = [dict(c, status="False") if c["type"] in ("Ready", "ContainersReady") else c
                        for c in st["conditions"]]
    for cs in st["containerStatuses"]:
        cs.update({"ready": False, "started": False, "state": {"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error", "startedAt": st["startTime"],
            "finishedAt": now()}}})
    return pod


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    if details:
        body["details"] = details
    return code, body


FIELDS = {"metadata.name": lambda p: p["metadata"].get("name"),
          "metadata.namespace": lambda p: p["metadata"].get("namespace"),
          "status.phase": lambda p: p.get("status", {}).get("phase")}


def selector(query):
    """The pods' selector of a list or watch: (labelSelector, fieldSelector), or a refusal as
    the API server's: fields other than FIELDS are not supported."""
    fields = query.get("fieldSelector", [""])[0]
    for term in filter(None, fields.split(",")):
        key = term.split("!=")[0].split("=")[0]
        if key not in FIELDS:
            return None, status(400, "BadRequest", 'field label not supported: %s' % key)
    return (query.get("labelSelector", [""])[0], fields), None


def matches(pod, sel):
    """Whether pod is one of sel's: labels k=v, fields k=v, k==v or k!=v, each term must hold."""
    labels_sel, fields_sel = sel
    labels = pod["metadata"].get("labels") or {}
    for term in filter(None, labels_sel.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    for term in filter(None, fields_sel.split(",")):
        negate = "!=" in term
        key, _, value = term.replace("!=", "=").replace("==", "=").partition("=")
        if (FIELDS[key](pod) == value) == negate:
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


def notify(ns, kind, pod):
    """Tells the open watches of pods in ns (the caller holds the lock)."""
    for wns, sel, q in watchers:
        if wns == ns and matches(pod, sel):
            q.put({"type": kind, "object": pod})


def records(method, ns, name, body, role, store, kind, resource, group="", check=None):
    """Objects kept as they were made (NetworkPolicies: the stand-in's pods have no network to
    cut; ConfigMaps, which pods' volumes show): create, get, list, delete. check(obj): a
    refusal, or None."""
    verb = {"POST": "create", "DELETE": "delete"}.get(method, "get" if name else "list")
    full = resource + ("." + group if group else "")
    if role != "admin" and verb not in ("get", "list"):
        return status(403, "Forbidden", '%s is forbidden: User "reader" cannot %s resource "%s" in API group "%s" in '
                      'the namespace "%s"' % (full, verb, resource, group, ns), {"group": group, "kind": resource})
    if ns not in NAMESPACES:
        return status(404, "NotFound", 'namespaces "%s" not found' % ns, {"name": ns, "kind": "namespaces"})
    with lock:
        if verb == "list":
            items = [o for (ons, _), o in sorted(store.items()) if ons == ns]
            return 200, {"kind": kind + "List", "apiVersion": (group + "/v1") if group else "v1", "metadata": {},
                         "items": items}
        if verb == "create":
            obj = json.loads(body or b"{}")
            oname = (obj.get("metadata") or {}).get("name")
            if not oname:
                return status(422, "Invalid", '%s "" is invalid: metadata.name: Required value' % kind)
            refused = check(obj) if check else None
            if refused:
                return refused
            if (ns, oname) in store:
                return status(409, "AlreadyExists", '%s "%s" already exists' % (full, oname),
                              {"name": oname, "kind": resource})
            obj["metadata"]["namespace"] = ns
            store[(ns, oname)] = obj
            return 201, obj
        obj = store.get((ns, name))
        if obj is None:
            return status(404, "NotFound", '%s "%s" not found' % (full, name), {"name": name, "kind": resource})
        if verb == "delete":
            del store[(ns, name)]
        return 200, obj


def config_map_size(cm):
    """A ConfigMap over the API server's 1 MiB, refused; binaryData must be base64."""
    try:
        size = sum(len(v) for v in (cm.get("data") or {}).values()) + \
            sum(len(base64.b64decode(v)) for v in (cm.get("binaryData") or {}).values())
    except ValueError:
        return status(400, "BadRequest", 'ConfigMap "%s": binaryData is not base64' % cm["metadata"]["name"])
    if size > 1024 * 1024:
        return status(422, "Invalid", 'ConfigMap "%s" is invalid: []: Too long: must have at most 1048576 bytes'
                      % cm["metadata"]["name"])
    return None


def config_map_volume(ns, volume, directory):
    """Writes a configMap volume's files into directory; None when the configMap is missing."""
    cm = configmaps.get((ns, volume.get("name")))
    if cm is None:
        return None
    mode = volume.get("defaultMode", 0o644)
    os.makedirs(directory)
    os.chmod(directory, 0o755)
    files = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
    files.update({k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()})
    for key, data in files.items():
        path = os.path.join(directory, key)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
    return directory


def pending(pod, why):
    """A pod the kubelet cannot start: Pending, its container waiting in ContainerCreating."""
    pod = running(pod)
    pod["status"]["phase"] = "Pending"
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}]
    for cs in pod["status"]["containerStatuses"]:
        cs.update({"ready": False, "started": False,
                   "state": {"waiting": {"reason": "ContainerCreating", "message": why}}})
    return pod


def handle(method, path, query, body, role):
    parts = [p for p in path.split("/") if p]
    if method == "GET" and path == "/version":
        return 200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0-llmbox-standin", "platform": "linux/amd64"}
    if method == "GET" and path == "/api":
        return 200, {"kind": "APIVersions", "versions": ["v1"],
                     "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
    if method == "GET" and path == "/apis":
        return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": "networking.k8s.io", "versions": [{"groupVersion": "networking.k8s.io/v1", "version": "v1"}],
             "preferredVersion": {"groupVersion": "networking.k8s.io/v1", "version": "v1"}}]}
    if method == "GET" and path == "/apis/networking.k8s.io/v1":
        return 200, {"kind": "APIResourceList", "groupVersion": "networking.k8s.io/v1", "resources": [
            {"name": "networkpolicies", "singularName": "", "namespaced": True, "kind": "NetworkPolicy",
             "verbs": ["create", "delete", "get", "list"], "shortNames": ["netpol"]}]}
    if method == "GET" and path == "/api/v1":
        return 200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "pods", "singularName": "", "namespaced": True, "kind": "Pod",
             "verbs": ["create", "delete", "get", "list", "watch"], "shortNames": ["po"]},
            {"name": "pods/exec", "singularName": "", "namespaced": True, "kind": "PodExecOptions",
             "verbs": ["create", "get"]},
            {"name": "pods/attach", "singularName": "", "namespaced": True, "kind": "PodAttachOptions",
             "verbs": ["create", "get"]},
            {"name": "configmaps", "singularName": "", "namespaced": True, "kind": "ConfigMap",
             "verbs": ["create", "delete", "get", "list"], "shortNames": ["cm"]}]}
    if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods" \
            and parts[6] in ("exec", "attach"):
        # as the API server: who may, and which pod (a completed one cannot be attached to),
        # before the missing upgrade
        if role != "admin":
            return status(403, "Forbidden", 'pods "%s" is forbidden: User "reader" cannot create resource "pods/%s" '
                          'in API group "" in the namespace "%s"' % (parts[5], parts[6], parts[3]))
        with lock:
            pod = pods.get((parts[3], parts[5]))
            if pod is None:
                return status(404, "NotFound", 'pods "%s" not found' % parts[5], {"name": parts[5], "kind": "pods"})
            phase = pod["status"].get("phase")
            if parts[6] == "attach" and phase in ("Succeeded", "Failed"):
                return status(400, "BadRequest", "cannot attach to a container in a completed pod; current phase is %s"
                              % phase)
        return status(400, "BadRequest", "Upgrade request required")
    if parts[:4] == ["apis", "networking.k8s.io", "v1", "namespaces"] and len(parts) in (6, 7) \
            and parts[5] == "networkpolicies":
        return records(method, parts[4], parts[6] if len(parts) == 7 else None, body, role, netpols, "NetworkPolicy",
                       "networkpolicies", "networking.k8s.io")
    if len(parts) in (5, 6) and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "configmaps":
        return records(method, parts[3], parts[5] if len(parts) == 6 else None, body, role, configmaps, "ConfigMap",
                       "configmaps", check=config_map_size)
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
            sel, refused = selector(query)
            if refused:
                return refused
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
            limits = (containers[0].get("resources") or {}).get("limits") or {}
            # the sizes of the emptyDir volumes at /sandbox and /tmp are the sandbox's
            volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
            sizes, mounts = {}, []
            for m in containers[0].get("volumeMounts") or []:
                volume = volumes.get(m.get("name")) or {}
                empty = volume.get("emptyDir")
                if empty and empty.get("sizeLimit"):
                    sizes[m.get("mountPath")] = quantity(str(empty["sizeLimit"]))
                if volume.get("configMap"):
                    # (read-only whatever the mount says, as the kubelet mounts them)
                    src = config_map_volume(ns, volume["configMap"], os.path.join(FIFOS, "cm-" + uuid.uuid4().hex))
                    if src is None:
                        pods[(ns, pname)] = pending(pod, 'MountVolume.SetUp failed for volume "%s" : configmap "%s" '
                                                    'not found' % (m.get("name"), volume["configMap"].get("name")))
                        notify(ns, "ADDED", pods[(ns, pname)])
                        return 201, pods[(ns, pname)]
                    mounts.append({"src": src, "dst": m.get("mountPath")})
            agent = Agent(FIFOS, quantity(str(limits.get("memory", "0"))), containers[0].get("env") or [], sizes,
                          mounts)
            if agent.error:
                agent.stop()
                return status(500, "InternalError", "the stand-in could not make the pod's sandbox: " + agent.error)
            agents[(ns, pname)] = agent
            pods[(ns, pname)] = running(pod)
            notify(ns, "ADDED", pods[(ns, pname)])
            command = (containers[0].get("command") or []) + (containers[0].get("args") or [])
            if containers[0].get("command"):
                cancel = os.path.join(OUT, "cancel-" + uuid.uuid4().hex)
                mains[(ns, pname)] = Main(agent, command, containers[0], cancel,
                                          lambda code, ns=ns, pname=pname, agent=agent: ended(ns, pname, agent, code))
            return 201, pods[(ns, pname)]
        pod = pods.get((ns, name))
        if pod is None:
            return status(404, "NotFound", 'pods "%s" not found' % name, {"name": name, "kind": "pods"})
        if verb == "delete":
            del pods[(ns, name)]
            notify(ns, "DELETED", pod)
            agent = agents.pop((ns, name), None)
            mains.pop((ns, name), None)
            if agent:
                threading.Thread(target=agent.stop, args=(True,), daemon=True).start()
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
            code, answer = handle(method, url.path, urllib.parse.parse_qs(url.query, keep_blank_values=True), body, role)
        self.refuse(code, answer)

    def watch_pods(self, ns, query):
        """GET pods?watch=true: the matching pods as ADDED, then every change, as JSON lines in a
        chunked answer, until timeoutSeconds (default 60) or the client goes."""
        sel, refused = selector(query)
        if refused:
            return self.refuse(*refused)
        q = queue.Queue()
        with lock:
            for (pns, _), pod in sorted(pods.items()):
                if pns == ns and matches(pod, sel):
                    q.put({"type": "ADDED", "object": pod})
            entry = (ns, sel, q)
            watchers.append(entry)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        deadline = time.time() + float(query.get("timeoutSeconds", ["60"])[0] or 60)
        try:
            while time.time() < deadline:
                try:
                    event = q.get(timeout=max(0.01, min(0.5, deadline - time.time())))
                except queue.Empty:
                    continue
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client went away
            pass
        finally:
            with lock:
                watchers.remove(entry)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        if (len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods"
                and query.get("watch", [""])[0].lower() in ("true", "1")):
            auth = self.headers.get("Authorization") or ""
            if TOKENS.get(auth[len("Bearer "):]) is None or not auth.startswith("Bearer "):
                return self.refuse(*status(401, "Unauthorized", "Unauthorized"))
            if parts[3] not in NAMESPACES:
                return self.refuse(*status(404, "NotFound", 'namespaces "%s" not found' % parts[3]))
            return self.watch_pods(parts[3], query)
        if self.stream(parts, query):
            return
        self.serve("GET")

    def refuse(self, code, answer):  # (any answer as JSON: a refusal, mostly)
        data = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def may(self, ns, name, sub):
        """The pod's agent, when the token may create pods/SUB on it; else None, refused."""
        auth = self.headers.get("Authorization") or ""
        role = TOKENS.get(auth[len("Bearer "):]) if auth.startswith("Bearer ") else None
        if role is None:
            return self.refuse(*status(401, "Unauthorized", "Unauthorized"))
        if role != "admin":
            return self.refuse(*status(403, "Forbidden", 'pods "%s" is forbidden: User "reader" cannot create resource '
                                       '"pods/%s" in API group "" in the namespace "%s"' % (name, sub, ns)))
        with lock:
            agent = agents.get((ns, name))
        if agent is None:
            return self.refuse(*status(404, "NotFound", 'pods "%s" not found' % name, {"name": name, "kind": "pods"}))
        return agent

    def upgrade(self, query):
        """The channels of the stream protocol the client asked for: a websocket's subprotocol,
        or SPDY/3.1 (with X-Stream-Protocol-Version); None when refused (answered here)."""
        if (self.headers.get("Upgrade") or "").lower() == "spdy/3.1":
            offered = [p.strip() for h in self.headers.get_all("X-Stream-Protocol-Version") or [] for p in h.split(",")]
            if "v4.channel.k8s.io" not in offered:
                return self.refuse(*status(403, "Forbidden", "unable to upgrade: unable to negotiate protocol: client "
                                           "supports %s, server accepts [v4.channel.k8s.io]" % offered))
            self.send_response(101)
            self.send_header("Connection", "Upgrade")
            self.send_header("Upgrade", "SPDY/3.1")
            self.send_header("X-Stream-Protocol-Version", "v4.channel.k8s.io")
            self.end_headers()
            self.wfile.flush()
            self.close_connection = True
            wanted = {"error"} | {s for s in ("stdin", "stdout", "stderr") if flag(query, s)}
            log("%s over SPDY/3.1 (v4.channel.k8s.io)" % self.path.split("?")[0])
            channels = SpdyChannels(self.rfile, self.wfile, wanted)
            why = channels.wait_streams(30)
            if why is not None:
                channels.finish(status(500, "InternalError", why)[1])
                return None
            return channels
        offered = [p.strip() for p in (self.headers.get("Sec-WebSocket-Protocol") or "").split(",")]
        chosen = next((p for p in offered if p in SPOKEN), None)
        if chosen is None:
            return self.refuse(*status(400, "BadRequest", "none of the offered subprotocols is spoken here: %s"
                                       % ", ".join(offered)))
        key = self.headers.get("Sec-WebSocket-Key") or ""
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept.decode())
        self.send_header("Sec-WebSocket-Protocol", chosen)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        log("%s over a websocket (%s)" % (self.path.split("?")[0], chosen))
        return WebSocketChannels(self.rfile, self.wfile)

    def attach(self, ns, name, query):
        agent = self.may(ns, name, "attach")
        if agent is None:
            return
        with lock:
            main, pod = mains.get((ns, name)), pods.get((ns, name))
        if main is None or main.exit is not None:
            phase = (pod or {}).get("status", {}).get("phase", "Unknown")
            return self.refuse(*status(400, "BadRequest", "cannot attach to a container in a completed pod; current "
                                       "phase is %s" % phase if main else "the stand-in runs no image entrypoint: "
                                       "pod %s's container has no command to attach to" % name))
        want_stdin = flag(query, "stdin")
        if want_stdin and main.feed is None:
            return self.refuse(*status(400, "BadRequest", "stdin requested, but the container of pod %s was not "
                                       "created with stdin: true" % name))
        channels = self.upgrade(query)
        if channels is None:
            return
        gone = threading.Event()

        def read_client():
            while True:
                event = channels.recv()
                if event is None:
                    break
                if want_stdin and event[0] == "stdin":
                    main.feed.write(event[1])
                elif want_stdin and event[0] == "stdin-end" and main.stdin_once:
                    main.feed.close()
            if want_stdin and main.stdin_once:
                main.feed.close()
            gone.set()
        out = channels.send
        main.subscribe(out)
        threading.Thread(target=read_client, daemon=True).start()
        while not main.done.is_set() and not gone.is_set():
            main.done.wait(0.1)
        main.unsubscribe(out)
        if main.done.is_set():
            channels.finish(exit_status(main.exit, "command terminated with non-zero exit code: exit code %d"
                                        % main.exit))

    def exec(self, ns, name, query):
        agent = self.may(ns, name, "exec")
        if agent is None:
            return
        argv = query.get("command") or []
        if not argv:
            return self.refuse(*status(400, "BadRequest", "you must specify at least 1 command"))
        channels = self.upgrade(query)
        if channels is None:
            return
        # stdin streams to the command as it comes (v5 and SPDY can end it; websocket v4 ends
        # with the connection), and a client that goes away stops its exec (a cluster's would go
        # on: the backend stops its runs itself; here nothing would ever end a forgotten one)
        done = threading.Event()
        feed = Feed(agent.dir, done) if flag(query, "stdin") else None
        cancel = os.path.join(OUT, "cancel-" + uuid.uuid4().hex)

        def read_client():
            while True:
                event = channels.recv()
                if event is None:
                    break
                if feed and event[0] == "stdin":
                    feed.write(event[1])
                elif feed and event[0] == "stdin-end":
                    feed.close()
            if feed:
                feed.close()
            if not done.is_set():
                open(cancel, "w").close()
        threading.Thread(target=read_client, daemon=True).start()
        code, err = agent.exec(argv, feed, channels.send, cancel)
        if err is not None:
            st = {"metadata": {}, "status": "Failure", "message": err, "reason": "InternalError", "code": 500}
        else:
            st = exit_status(code, "command terminated with non-zero exit code: error executing command [%s], exit "
                             "code %d" % (" ".join(argv), code))
        done.set()
        channels.finish(st)

    def stream(self, parts, query):
        """Exec and attach with an upgrade to a stream protocol (websockets come with GET, SPDY
        with POST, as kubectl sends it): True when this was one."""
        if not (len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods"
                and parts[6] in ("exec", "attach")
                and (self.headers.get("Upgrade") or "").lower() in ("websocket", "spdy/3.1")):
            return False
        (self.exec if parts[6] == "exec" else self.attach)(parts[3], parts[5], query)
        return True

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        if self.stream([p for p in url.path.split("/") if p], urllib.parse.parse_qs(url.query, keep_blank_values=True)):
            return
        self.serve("POST")

    def do_DELETE(self):
        self.serve("DELETE")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


OUT = None
FIFOS = None  # the pods' FIFO directories: where their sandboxes' users may look (OUT may be private)


def main():
    global OUT, FIFOS
    out = OUT = sys.argv[1]
    FIFOS = tempfile.mkdtemp(prefix="llmbox-standin-")
    os.chmod(FIFOS, 0o755)
    atexit.register(shutil.rmtree, FIFOS, True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
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
