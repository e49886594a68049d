"""The property suite, shipped inside the package.

Each module holds properties that take one of the plugin's ``fp8_*``
fixtures (a target: a kernel, a format, an input dtype and the profile it is
judged against). The plugin parametrizes them over the kernels a repository
declares, or over fp8check's built-in adapters in fp8check's own
``properties/``.
"""
