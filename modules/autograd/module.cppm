// infini.autograd: the dynamic-graph autograd engine and differentiable ops (issue 3).
// For now it re-exports the layers below so that code can already `import infini.autograd;`.
export module infini.autograd;
export import infini.kernels;
