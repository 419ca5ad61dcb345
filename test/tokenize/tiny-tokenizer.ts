/**
 * @module A tiny byte-level BPE tokenizer.json built in code (GPT-2 byte alphabet, a few merges, two added tokens,
 * optionally a BOS post-processor), so registry and encoder tests load in milliseconds instead of Qwen3's seconds.
 */

/** GPT-2's byte → printable character table, the alphabet every byte-level BPE vocabulary starts from. */
function byteAlphabet(): string[] {
  const keep: number[] = [];
  for (let b = 33; b <= 126; b++) keep.push(b);
  for (let b = 161; b <= 172; b++) keep.push(b);
  for (let b = 174; b <= 255; b++) keep.push(b);
  const out = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) out[b] = String.fromCharCode(keep.includes(b) ? b : 256 + extra++);
  return out;
}

export const TINY_SPLIT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

export function tinyTokenizerJson(opts: { bos?: boolean; normalizer?: boolean } = {}): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  byteAlphabet().forEach((c, i) => (vocab[c] = i));
  const merges: Array<[string, string]> = [["h", "e"], ["l", "l"], ["he", "ll"], ["Ġ", "w"], ["o", "r"], ["Ġw", "or"], ["Ċ", "Ċ"]];
  let next = 256;
  for (const [a, b] of merges) vocab[a + b] = next++;
  const added = [
    { id: next++, content: "<|start|>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
    { id: next++, content: "<|end|>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
    { id: next++, content: "<s>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
  ];
  const bos = { SpecialToken: { id: "<s>", type_id: 0 } };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: opts.normalizer ? { type: "NFC" } : null,
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: TINY_SPLIT }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
      ],
    },
    post_processor: opts.bos
      ? {
          type: "TemplateProcessing",
          single: [bos, { Sequence: { id: "A", type_id: 0 } }],
          pair: [bos, { Sequence: { id: "A", type_id: 0 } }, bos, { Sequence: { id: "B", type_id: 1 } }],
          special_tokens: { "<s>": { id: "<s>", ids: [added[2]!.id], tokens: ["<s>"] } },
        }
      : { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
  };
}

export const TINY_TEMPLATE =
  "{% for m in messages %}<|start|>{{ m.role }}\n{{ m.content }}<|end|>\n{% endfor %}{% if add_generation_prompt %}<|start|>assistant\n{% endif %}";

export function tinyTokenizerConfig(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { tokenizer_class: "PreTrainedTokenizerFast", eos_token: "<|end|>", bos_token: "<s>", chat_template: TINY_TEMPLATE, ...extra };
}
