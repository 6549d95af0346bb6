// infini.parallel: process groups, data/tensor/sequence/pipeline parallelism.
// For now it re-exports the layers below so that code can already `import infini.parallel;`.
export module infini.parallel;
export import infini.nn;
