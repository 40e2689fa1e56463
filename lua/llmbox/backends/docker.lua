-- The docker backend: containers through the Docker Engine API (llmbox.backends.engines).
return require("llmbox.backends.engines").driver("docker")
