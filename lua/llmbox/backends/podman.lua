-- The podman backend: containers through Podman's Docker-compatible API (llmbox.backends.engines).
return require("llmbox.backends.engines").driver("podman")
