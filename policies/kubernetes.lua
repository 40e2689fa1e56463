-- The policy for the kubernetes backend (`-b kubernetes -p kubernetes`): default.lua's limits,
-- checks, environment and syscall rules (llmbox loads them on every run's program, on top of the
-- container runtime's own seccomp profile), with the cluster's isolation accepted: a pod's
-- network is cut by a deny-all NetworkPolicy that llmbox makes for each pod, which the cluster's
-- network plugin must enforce. Every other backend ignores the kubernetes section.
return {
    extends = "default",
    description = "default's limits and syscall rules on a Kubernetes cluster, a deny-all NetworkPolicy.",

    kubernetes = {
        isolation = "cluster",
        -- namespace = "sandboxes",   -- else the kubeconfig context's, else "default"
        -- labels = { team = "agents" }, annotations = { ["example.com/owner"] = "me" },
        -- pod_manifest = [[{"spec": {"nodeSelector": {"pool": "sandboxes"}}}]],
        ready_timeout = "120s",
        gc_after = "1h",
    },
}
