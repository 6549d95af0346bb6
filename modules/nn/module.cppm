// infini.nn: modules, layers, losses, optimizers, data and checkpoints (issue 4).
// For now it re-exports the layers below so that code can already `import infini.nn;`.
export module infini.nn;
export import infini.autograd;
