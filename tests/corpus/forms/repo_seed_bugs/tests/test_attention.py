from model.attention import attention  # noqa: F401 - merely imports it
