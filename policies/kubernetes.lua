-- The policy for the kubernetes backend (`-b kubernetes -p kubernetes`): default.lua's limits,
-- checks and environment, with the cluster's isolation accepted. A pod's syscalls are filtered
-- by the container runtime's default seccomp profile (not by the syscall rules below) and its
-- network is cut by a deny-all NetworkPolicy that llmbox makes for each pod, which the cluster's
-- network plugin must enforce. Every other backend ignores the kubernetes section.
return {
    extends = "default",
    description = "default's limits on a Kubernetes cluster: the runtime's seccomp, a deny-all NetworkPolicy.",

    kubernetes = {
        isolation = "cluster",
        -- namespace = "sandboxes",   -- else the kubeconfig context's, else "default"
        -- labels = { team = "agents" }, annotations = { ["example.com/owner"] = "me" },
        -- pod_manifest = [[{"spec": {"nodeSelector": {"pool": "sandboxes"}}}]],
        ready_timeout = "120s",
        gc_after = "1h",
    },
}
