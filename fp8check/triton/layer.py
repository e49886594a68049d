"""The shape every layer of the faithful interpreter has, and the stack that installs layers in order.

A :class:`Layer` patches Triton only through the :class:`~fp8check.patching.PatchScope` it is
given and names the Triton releases it was written against (``triton_versions``: one table per
layer). A :class:`LayerStack` installs its layers in their listed order, each into a scope of its
own, and removes them in reverse with one loop. :class:`BuilderOps` is a layer's table of
``InterpreterBuilder`` methods (the shape of Triton's own builder: one method per interpreter op,
a name -> method table). Nothing here imports the rest of :mod:`fp8check.triton`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from fp8check.patching import PatchScope

__all__ = ["Layer", "LayerStack", "BuilderOps", "interpreter", "installed_triton_version"]


def interpreter() -> Any:
    """Triton's interpreter module (``triton.runtime.interpreter``)."""
    import triton.runtime.interpreter as interp

    return interp


def installed_triton_version() -> str:
    """The installed Triton's release without a local suffix (``"3.9.0"``; '' without Triton)."""
    try:
        import triton
    except ImportError:
        return ""
    return str(getattr(triton, "__version__", "")).split("+")[0]


class Layer:
    """One layer of patches. ``optional``: on a Triton outside ``triton_versions`` the layer is left
    out (Triton's own code runs); a required layer's table is checked by the entry points before
    anything is installed (:func:`fp8check.triton.check_triton_version`)."""

    name = "layer"
    triton_versions: tuple[str, ...] = ()
    optional = False

    def supports(self, version: str) -> bool:
        return version in self.triton_versions

    def install(self, scope: PatchScope, interp: Any) -> None:
        raise NotImplementedError

    def remove(self, scope: PatchScope) -> None:
        scope.restore()


class LayerStack:
    """Layers installed in the listed order and removed in reverse."""

    def __init__(self, layers: Sequence[Layer]) -> None:
        self.layers = tuple(layers)
        self._installed: list[tuple[Layer, PatchScope]] = []

    def install(self) -> None:
        interp = interpreter()
        version = installed_triton_version()
        try:
            for layer in self.layers:
                if layer.optional and not layer.supports(version):
                    continue
                scope = PatchScope()
                self._installed.append((layer, scope))
                layer.install(scope, interp)
        except BaseException:
            self.remove()  # a layer that failed half way leaves nothing patched
            raise

    def remove(self) -> None:
        while self._installed:
            layer, scope = self._installed.pop()
            layer.remove(scope)


class BuilderOps:
    """A table of replacements for ``InterpreterBuilder`` methods: :meth:`table` maps a builder method's
    name to a callable ``op(inner, builder, *args)``, ``inner`` being the method it replaces (what was
    installed below). Names the installed Triton's builder lacks are skipped."""

    def table(self) -> dict[str, Callable[..., Any]]:
        raise NotImplementedError

    def install_ops(self, scope: PatchScope, builder: type) -> None:
        for name, op in self.table().items():
            inner = builder.__dict__.get(name)
            if inner is not None:
                scope.set(builder, name, self.bind(name, inner, op))

    def bind(self, name: str, inner: Callable[..., Any], op: Callable[..., Any]) -> Callable[..., Any]:
        def method(builder: Any, *args: Any, **kwargs: Any) -> Any:
            return op(inner, builder, *args, **kwargs)

        method.__name__ = method.__qualname__ = name
        return method
