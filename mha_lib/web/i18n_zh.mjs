// i18n_zh.mjs -- the live views' texts in Simplified Chinese, for the pages of the book's Chinese edition.
//
// ZH maps each English text of a t("...") call (i18n.mjs) to its Chinese, with the same {placeholders}; a text
// missing here shows in English. Grouped by the module that uses it first. The terms are the book's glossary's
// (注意力头, 查询/键/值, 词元, 掩码, 剪枝, 归纳头, 交叉注意力, KV 缓存, 注意力图 ...); full-width punctuation, and a
// space between Chinese and Latin letters or digits. mha_lib/web/test/i18n.test.mjs checks it against the modules.

export const ZH = {
  // draw.mjs
  "{label} (off)": "{label}（已关闭）",
  "attention map of {n} tokens": "{n} 个词元的注意力图",
  "rows are queries, columns are keys": "行是查询，列是键",
  "{label}, turned off: {map}; Enter enlarges it": "{label}，已关闭：{map}；按 Enter 键放大",
  "{label}: {map}; Enter enlarges it": "{label}：{map}；按 Enter 键放大",
  "Close the enlarged map": "关闭放大图",
  "{n} a side": "每边 {n} 格",
  "{rows} rows, {columns} columns": "{rows} 行，{columns} 列",
  "{label} (turned off), enlarged: {axes} ({size}). Arrow keys move through the cells; Escape closes.":
    "{label}（已关闭）放大图：{axes}（{size}）。方向键在格子间移动；按 Esc 键关闭。",
  "{label}, enlarged: {axes} ({size}). Arrow keys move through the cells; Escape closes.":
    "{label} 放大图：{axes}（{size}）。方向键在格子间移动；按 Esc 键关闭。",
  "Point at a cell, or use the arrow keys, to read its weight here.": "指向一个格子或使用方向键，即可在这里读出它的权重。",
  "weight ": "权重 ",
  "colour scale: dark purple 0 to yellow {vmax}": "颜色刻度：深紫色为 0，黄色为 {vmax}",
  // head_toggles.mjs
  "heads: {layers} layers x {heads}; pressed = on; arrow keys move between heads":
    "注意力头：{layers} 层 × 每层 {heads} 个；按下 = 开启；方向键在头之间移动",
  "layer {layer} head {head}": "第 {layer} 层第 {head} 个头",
  "All heads on": "开启全部头",
  "Click a head to turn it off or on (pressed = on); with the keyboard, Tab into the grid, move with the arrow keys and toggle with Space.":
    "点击一个头可将其关闭或开启（按下 = 开启）；使用键盘时，按 Tab 键进入网格，用方向键移动，按空格键切换。",
  // integrity.mjs
  "{name} is not the file the book was built with (its SHA-256 is {got}…, the manifest's {expected}…)":
    "{name} 不是构建本书时所用的文件（它的 SHA-256 为 {got}…，清单中为 {expected}…）",
  // layer_maps.mjs
  "layer {layer} ({nth} of {count})": "第 {layer} 层（{count} 层中的第 {nth} 层）",
  "layers 0–{last}": "第 0–{last} 层",
  "Layer": "层",
  "all layers": "全部层",
  "layer {layer}": "第 {layer} 层",
  "Layer {layer} of your text, shown until layer {chosen} arrives (its file and those before it are on their way).":
    "你的文本的第 {layer} 层，在第 {chosen} 层到达之前先显示它（第 {chosen} 层及其之前各层的文件正在下载）。",
  // mha_live.mjs
  "This live view could not start ({error}); the figure is the one computed when {when}.":
    "这个实时视图无法启动（{error}）；图是{when}时计算的。",
  // runtime_browser.mjs
  "Apache-2.0, converted to ONNX, float16 weights": "Apache-2.0，已转换为 ONNX，float16 权重",
  "trained for this book": "为本书训练",
  "Models: {ids}": "模型：{ids}",
  "Model: {ids}": "模型：{ids}",
  "Runtime: onnxruntime-web": "运行时：onnxruntime-web",
  "this browser cannot run WebAssembly with SIMD": "这个浏览器无法运行带 SIMD 的 WebAssembly",
  "“{name}” could not be read as an ONNX model ({error})": "无法将“{name}”读取为 ONNX 模型（{error}）",
  "“{name}” has the inputs {got}; the toy view runs models with the inputs {inputs} (mha_lib.export.export_onnx of a chapter-1 model)":
    "“{name}”的输入是 {got}；玩具模型视图运行的模型，输入为 {inputs}（由 mha_lib.export.export_onnx 导出的第 1 章模型）",
  "“{name}” has the inputs {got}; the sentence view runs models with the inputs {inputs}":
    "“{name}”的输入是 {got}；句子视图运行的模型，输入为 {inputs}",
  "“{name}” has no output {missing} (its outputs: {outputs})": "“{name}”没有输出 {missing}（它的输出：{outputs}）",
  "“{name}” declares {layers} of {heads}; the page draws at most {most_layers} layers, {most_heads} heads a layer and {most_maps} maps":
    "“{name}”声明了 {layers}、每层 {heads}；本页最多绘制 {most_layers} 层、每层 {most_heads} 个头、共 {most_maps} 幅图",
  "“{name}” returned its {output} as {type}, not as float numbers": "“{name}”返回的 {output} 是 {type}，不是浮点数",
  "the model {model} returned logits of dims [{dims}]; the page ran {batch} × {tokens} tokens":
    "模型 {model} 返回的 logits 维度为 [{dims}]；本页运行的是 {batch} × {tokens} 个词元",
  "the model {model} returned {output} of dims [{dims}]; it declares {layers} of {heads}, and the page ran {batch} × {tokens} tokens":
    "模型 {model} 返回的 {output} 维度为 [{dims}]；它声明了 {layers}、每层 {heads}，而本页运行的是 {batch} × {tokens} 个词元",
  "“{name}”: its head_mask input has no fixed (num_layers, num_heads) shape (got {shape})":
    "“{name}”：它的 head_mask 输入没有固定的 (num_layers, num_heads) 形状（实际为 {shape}）",
  "“{name}” is an mha_lib {kind} model; the sentence view runs an export of a pretrained.BertEncoder (mha_lib.pretrained.load_bert)":
    "“{name}”是一个 mha_lib {kind} 模型；句子视图运行的是 pretrained.BertEncoder 的导出文件（mha_lib.pretrained.load_bert）",
  "“{name}” is not a file that mha_lib.export.export_onnx wrote; the sentence view runs an export of a pretrained.BertEncoder (mha_lib.pretrained.load_bert)":
    "“{name}”不是 mha_lib.export.export_onnx 写出的文件；句子视图运行的是 pretrained.BertEncoder 的导出文件（mha_lib.pretrained.load_bert）",
  "“{name}” has a vocabulary of {size} tokens; the page reads text with MiniLM's uncased English WordPiece vocabulary of {minilm}, so the model must use that one":
    "“{name}”的词表有 {size} 个词元；本页用 MiniLM 的英文 uncased WordPiece 词表（{minilm} 个词元）读取文本，所以模型必须使用这个词表",
  "“{name}” says its max_length is “{length}”: a sentence needs at least 3 positions":
    "“{name}”声明它的 max_length 为“{length}”：一个句子至少需要 3 个位置",
  "in your browser": "在你的浏览器中",
  "in your browser ({provider})": "在你的浏览器中（{provider}）",
  "The model": "模型",
  "the book was built": "构建本书",
  "Typed text never leaves your browser: the model runs on this page.": "输入的文字不会离开你的浏览器：模型就在本页中运行。",
  "Runs in browsers with WebAssembly SIMD (recent Chrome, Edge, Firefox, Safari). ":
    "在支持 WebAssembly SIMD 的浏览器中运行（较新的 Chrome、Edge、Firefox、Safari）。",
  "the models and the runtime (their size is unknown: the list of models could not be read)": "这些模型和运行时（大小未知：无法读取模型列表）",
  "the model and the runtime (their size is unknown: the list of models could not be read)": "模型和运行时（大小未知：无法读取模型列表）",
  "The first time, your browser downloads {what}; it keeps them.": "首次使用时，你的浏览器会下载{what}；下载的文件会保留在浏览器中。",
  "Everything it needs is already loaded.": "所需的一切都已加载。",
  "the models": "这些模型",
  "the model": "模型",
  "the models and the runtime": "这些模型和运行时",
  "the model and the runtime": "模型和运行时",
  "Downloading {what}: {got} of {total}…": "正在下载{what}：{got} / {total}…",
  "Preparing the model…": "正在准备模型…",
  "The models run in your browser (loaded in {seconds} s).": "这些模型在你的浏览器中运行（加载用时 {seconds} 秒）。",
  "The model runs in your browser (loaded in {seconds} s).": "模型在你的浏览器中运行（加载用时 {seconds} 秒）。",
  "The live model could not be loaded ({message}).": "无法加载实时模型（{message}）。",
  // runtime_kernel.mjs
  "by the notebook's kernel": "由 notebook 的内核",
  "The kernel": "内核",
  "the cell ran": "运行该单元格",
  "Typed text goes to this notebook's kernel, which computes the maps with mha_lib.":
    "输入的文字会发送到这个 notebook 的内核，由它用 mha_lib 计算注意力图。",
  "Computed by this notebook's kernel with mha_lib (PyTorch): models {ids}.": "由这个 notebook 的内核用 mha_lib（PyTorch）计算：模型 {ids}。",
  "Computed by this notebook's kernel with mha_lib (PyTorch): model {ids}.": "由这个 notebook 的内核用 mha_lib（PyTorch）计算：模型 {ids}。",
  "The notebook's kernel recomputes it with mha_lib.": "notebook 的内核会用 mha_lib 重新计算。",
  "The kernel is loading the model…": "内核正在加载模型…",
  "The kernel loaded the model in {seconds} s; it computes every change.": "内核加载模型用时 {seconds} 秒；之后每次改动都由它计算。",
  "The kernel could not load the model ({message}).": "内核无法加载模型（{message}）。",
  // text.mjs
  "the model ({size})": "模型（{size}）",
  "the {count} models ({size})": "全部 {count} 个模型（{size}）",
  "the runtime ({size})": "运行时（{size}）",
  "the runtime ({runtime}) and what the model's first maps need ({first}), then its other layers ({rest}) as they are computed":
    "运行时（{runtime}）和模型画出第一批注意力图所需的部分（{first}），其余各层（{rest}）在计算到时再下载",
  "what the model's first maps need ({first}), then its other layers ({rest}) as they are computed":
    "模型画出第一批注意力图所需的部分（{first}），其余各层（{rest}）在计算到时再下载",
  "{models} and {runtime}": "{models}和{runtime}",
  "{n} layers": "{n} 层",
  "{n} layer": "{n} 层",
  "{n} heads": "{n} 个头",
  "{n} head": "{n} 个头",
  "{label}: query “{query}” (position {q}) → key “{key}” (position {k}): weight {weight}":
    "{label}：查询“{query}”（位置 {q}）→ 键“{key}”（位置 {k}）：权重 {weight}",
  "Your text ({chars} characters) has {tokens} tokens; the model reads at most {kept}, so the maps are of its first {kept} tokens only. The box keeps your whole text.":
    "你的文本（{chars} 个字符）有 {tokens} 个词元；模型最多读取 {kept} 个，所以图中只是前 {kept} 个词元。文本框保留你的全部文本。",
  "{unknown} of its {pieces} word pieces is [UNK]: the model's vocabulary is English, so it cannot tell those characters apart (they all become the same unknown token).":
    "其中 {unknown} 个子词（共 {pieces} 个）是 [UNK]：模型的词表是英文的，无法区分这些字符（它们都变成同一个未知词元）。",
  "{unknown} of its {pieces} word pieces are [UNK]: the model's vocabulary is English, so it cannot tell those characters apart (they all become the same unknown token).":
    "其中 {unknown} 个子词（共 {pieces} 个）是 [UNK]：模型的词表是英文的，无法区分这些字符（它们都变成同一个未知词元）。",
  "{name} at {count} training checkpoints (steps {first} to {last})": "{name}，共 {count} 个训练检查点（第 {first} 到 {last} 步）",
  "{name} after {steps} steps": "{name}（训练 {steps} 步后）",
  ", ": "、",
  // view.mjs
  "download progress": "下载进度",
  "Fetching word vectors ({files} files, {size}), then computing {where}…": "正在获取词向量（{files} 个文件，{size}），然后{where}计算…",
  "Fetching layer {layer} of the model ({size}), then computing {where}…": "正在获取模型的第 {layer} 层（{size}），然后{where}计算…",
  "licence": "许可证",
  "mha_lib's code, no weights": "mha_lib 的代码，没有权重",
  " (": "（",
  "; ": "；",
  ")": "）",
  "The maps shown are the ones computed when {when}, as is the figure below.": "显示的注意力图是{when}时计算的，下方的图也是。",
  "The maps shown are the ones computed when {when}.": "显示的注意力图是{when}时计算的。",
  "Try again": "重试",
  "Trying again…": "正在重试…",
  "This input was refused: {reason}. The maps show the last result.": "这个输入被拒绝：{reason}。图中仍是上一次的结果。",
  "all-MiniLM-L6-v2 was trained on English text and its vocabulary is English (uncased BERT's WordPiece): Chinese text is split into single characters, one token each, and every character missing from its vocabulary (many are: it holds 244 Chinese characters) becomes [UNK]. The maps show those tokens, so an English sentence gives maps worth reading.":
    "注意：all-MiniLM-L6-v2 是用英文文本训练的，词表也是英文的（uncased BERT 的 WordPiece 词表）。中文文本会被拆成单个汉字，每个汉字一个词元；词表里没有的汉字都会变成 [UNK]（这样的字很多：词表只收录了 244 个汉字）。注意力图显示的正是这些词元，所以只有英文句子的注意力图才值得细看。",
  "Point at a cell to read its query token, key token and weight; click a map to enlarge it. On a touch screen, tap a map to enlarge it, then tap a cell.":
    "指向一个格子，可读出它的查询词元、键词元和权重；点击一张图可将其放大。在触摸屏上，先点一张图将其放大，再点其中的格子。",
  ", then the word vectors of the words of each new text": "，之后每段新文本还会下载其中各词的词向量",
  ", then the word vectors of the words of each new text (a median {median} over the build's test sentences, at most {max})":
    "，之后每段新文本还会下载其中各词的词向量（在构建时的测试句子上，中位数为 {median}，最多 {max}）",
  "Computing {where}…": "{where}计算中…",
  "{who} could not compute this input ({error}). The maps show the last result.": "{who}无法计算这个输入（{error}）。图中仍是上一次的结果。",
  "Download {what} as {kind}": "以 {kind} 格式下载{what}",
  "The {kind} file could not be made ({error}).": "无法生成 {kind} 文件（{error}）。",
  "Download {what}:": "下载{what}：",
  "the maps shown": "显示的注意力图",
  "Rows are queries, columns keys; colour 0 to {vmax}.": "行是查询，列是键；颜色范围 0 到 {vmax}。",
  "{model}: attention of layers {layers} ({count} heads)": "{model}：{layers} 层的注意力（{count} 个头）",
  "{model}: attention of layer {layer} ({count} heads)": "{model}：{layer} 层的注意力（{count} 个头）",
  "Input: “{input}”": "输入：“{input}”",
  "Turned off: {heads}.": "已关闭：{heads}。",
  // head_view.mjs, steps.mjs, view_steps.mjs (chapter 2's lines and steps)
  "heads shown as lines": "以连线显示的注意力头",
  "All heads": "全部头",
  "Each line joins a query token (left) to a key token (right); its opacity is the weight, its colour the head. Point at a token, tap it, or focus the lines and use the arrow keys to see its lines alone; the buttons choose the heads.": "每条线连接一个查询词元（左）和一个键词元（右）；线的不透明度是权重，颜色代表注意力头。指向或轻触一个词元，或聚焦连线后使用方向键，即可只看它的连线；上方按钮用于选择注意力头。",
  "lines of layer {layer}: {count} heads shown over {n} tokens; the arrow keys pick a query token": "第 {layer} 层的连线：{n} 个词元上显示 {count} 个头；方向键选择查询词元",
  "no head shown": "未显示任何头",
  "Query “{token}”, its strongest key per head: {heads}": "查询“{token}”在每个头中权重最大的键：{heads}",
  "Key “{token}”, its strongest query per head: {heads}": "键“{token}”在每个头中权重最大的查询：{heads}",
  "{model}: lines of layer {layer} ({count} heads)": "{model}：第 {layer} 层的连线（{count} 个头）",
  "A line per query and key; opacity = weight, colour = head.": "每对查询和键一条线；不透明度 = 权重，颜色 = 注意力头。",
  "The lines of query “{token}”; opacity = weight, colour = head.": "查询“{token}”的连线；不透明度 = 权重，颜色 = 注意力头。",
  "Maps": "注意力图",
  "Lines (head view)": "连线（头视图）",
  "show the heads as": "注意力头的显示方式",
  "Show the heads as": "注意力头显示为",
  "the model {model} returned no layer inputs of dims [{layers}, 1, {tokens}, d_model] (got {dims})": "模型 {model} 没有返回维度为 [{layers}, 1, {tokens}, d_model] 的各层输入（得到的是 {dims}）",
  "{model}: layer {layer}, head {head}, step by step ({count} tokens)": "{model}：第 {layer} 层第 {head} 个头，逐步计算（{count} 个词元）",
  "Causal mask; blue negative, red positive, grey blocked; softmax 0 to 1.": "因果掩码；蓝色为负，红色为正，灰色为被屏蔽；softmax 范围 0 到 1。",
  "No mask; blue negative, red positive; softmax 0 to 1.": "无掩码；蓝色为负，红色为正；softmax 范围 0 到 1。",
  "the sequence has {count} tokens; give 1 to {most}": "这个序列有 {count} 个词元；请给出 1 到 {most} 个",
  "token {i} is “{token}”, not a number in 0..{last} (a star marks x_m)": "第 {i} 个词元是“{token}”，不是 0..{last} 中的数（星号标记 x_m）",
  "{count} tokens are marked with a star; mark exactly one": "有 {count} 个词元带星号；请恰好标记一个",
  "{rows} × {cols}": "{rows} × {cols}",
  "head {head}'s block of rows is marked": "已标出第 {head} 个头对应的行块",
  "{name}, {rows} rows by {cols} columns (its values are not shown)": "{name}，{rows} 行 {cols} 列（不显示其数值）",
  "{name}, {rows} rows by {cols} columns; focus it and use the arrow keys to read its cells": "{name}，{rows} 行 {cols} 列；聚焦后用方向键读取各格",
  "token “{token}” ({i})": "词元“{token}”（{i}）",
  "row {i}": "第 {i} 行",
  "column {i}": "第 {i} 列",
  "−∞ (blocked)": "−∞（被屏蔽）",
  "{matrix}: row {row}, column {column}: {value}": "{matrix}：行 {row}，列 {column}：{value}",
  "Type a sentence of your own, or pick another layer or head: the model reruns.": "输入你自己的句子，或选择另一层或另一个头：模型会重新运行。",
  "Edit the sequence, or pick another head: the model reruns.": "编辑序列，或选择另一个头：模型会重新运行。",
  "One attention head computed step by step on your input": "在你的输入上逐步计算一个注意力头",
  "Point at a cell (or tap it, or focus a matrix and use the arrow keys) to read its value.": "指向一个格子（或轻触它，或聚焦矩阵后使用方向键）即可读出它的数值。",
  "the head's stages": "这个头的各个步骤",
  "Tokens 0–{last} separated by spaces, 1 to {most} of them; a star marks x_m (exactly one): “3 *5 1 0”.": "词元为 0–{last}，以空格分隔，共 1 到 {most} 个；星号标记 x_m（恰好一个）：“3 *5 1 0”。",
  "Head": "注意力头",
  "head {head}": "第 {head} 个头",
  "causal mask (as in a decoder)": "因果掩码（如解码器）",
  "◀ Previous": "◀ 上一步",
  "Next ▶": "下一步 ▶",
  "Play": "播放",
  "the steps of the computation": "计算的各个步骤",
  "Pause": "暂停",
  "X: the layer's input, {L} tokens × {d} numbers": "X：这一层的输入，{L} 个词元 × {d} 个数",
  "Each row is one token's vector: what layer {layer} reads (for layer 0, the token and position embeddings; later, the output of the layer before). Every head of the layer reads the same X.": "每一行是一个词元的向量：第 {layer} 层读入的内容（第 0 层读入词元嵌入和位置嵌入；之后各层读入前一层的输出）。这一层的每个头读入同一个 X。",
  "Each row is one token's vector: the token and position embeddings after the block's LayerNorm (these models normalise first). Every head of the layer reads the same X.": "每一行是一个词元的向量：经过这个块的层规范化（LayerNorm）之后的词元嵌入和位置嵌入（这些模型先做规范化）。这一层的每个头读入同一个 X。",
  "Q, K, V: head {head}'s slices of the projections": "Q、K、V：第 {head} 个头在各投影中所占的切片",
  "Q = X W^Q_h + b^Q_h, and likewise K and V: head {head} owns columns {from}–{to} of W^Q, W^K and W^V, so its queries, keys and values have d_k = {dk} numbers per token.": "Q = X W^Q_h + b^Q_h，K 和 V 同理：第 {head} 个头拥有 W^Q、W^K 和 W^V 的第 {from}–{to} 列，所以它的查询、键和值每个词元有 d_k = {dk} 个数。",
  "Q·Kᵀ: every query against every key": "Q·Kᵀ：每个查询与每个键相比",
  "Entry (i, j) is the dot product of query i and key j: how well token i's query matches token j's key. One matrix product gives all {L} × {L} of them.": "第 (i, j) 项是查询 i 与键 j 的点积：词元 i 的查询与词元 j 的键有多匹配。一次矩阵乘法就得到全部 {L} × {L} 项。",
  "÷ √d_k: scores of a size the softmax can use": "÷ √d_k：让分数的大小适合 softmax",
  "Divided by √{dk} = {root}: the dot product of two vectors of d_k numbers grows with d_k, and the softmax of large scores puts nearly all the weight on one key.": "除以 √{dk} = {root}：两个含 d_k 个数的向量的点积随 d_k 增大，而对很大的分数做 softmax 会把几乎全部权重放在一个键上。",
  "+ M: the mask": "+ M：掩码",
  "M is −∞ (grey) for every key after its query: a causal mask, as a decoder uses. After the softmax those keys get weight 0.": "对每个查询之后的键，M 为 −∞（灰色）：这是因果掩码，解码器就这样用。经过 softmax 后这些键的权重为 0。",
  "M is 0 everywhere here: one sequence without padding, read by an encoder, blocks nothing. Tick “causal mask” to block every key after its query (−∞, grey), as a decoder does.": "这里 M 处处为 0：编码器读取一个没有填充的序列，不屏蔽任何位置。勾选“因果掩码”即可像解码器那样屏蔽每个查询之后的键（−∞，灰色）。",
  "softmax: each row becomes weights that sum to 1": "softmax：每一行变成和为 1 的权重",
  "A = softmax(S/√d_k + M), row by row: query i's weights over the keys. This is head {head}'s attention map (the maps of the other views are these matrices).": "A = softmax(S/√d_k + M)，逐行计算：查询 i 在各个键上的权重。这就是第 {head} 个头的注意力图（其他视图中的图就是这些矩阵）。",
  "A · V: each query gets a weighted mix of the values": "A · V：每个查询得到值的加权混合",
  "Row i of head{head} is Σ_j A[i, j] V[j]: the values of the keys that query i attends to, mixed by its weights.": "head{head} 的第 i 行是 Σ_j A[i, j] V[j]：查询 i 所关注的键的值，按它的权重混合。",
  "Concat: the {H} heads side by side": "Concat：{H} 个头并排拼接",
  "The {H} heads' outputs, {dk} numbers per token each, sit side by side in one {L} × {width} matrix; head {head}'s block is outlined (columns {from}–{to}).": "{H} 个头的输出（每个词元各 {dk} 个数）并排放进一个 {L} × {width} 的矩阵；第 {head} 个头的块已用边框标出（第 {from}–{to} 列）。",
  "· W^O: the output projection": "· W^O：输出投影",
  "output = Concat · W^O + b^O: the {width} × {d} matrix W^O mixes the heads. Head {head}'s block of rows of W^O (marked) gives its own term, head{head} W^O_{head} (the last matrix): the output is the sum of the {H} heads' terms plus the bias.": "output = Concat · W^O + b^O：各头输出拼接（Concat）后，{width} × {d} 的矩阵 W^O 把各个头混合起来。W^O 中第 {head} 个头的行块（已标出）给出它自己的一项 head{head} W^O_{head}（最后一个矩阵）：输出是 {H} 个头各自的项之和再加上偏置。",
  "Step {nth} of {count}: {title}": "第 {nth} 步（共 {count} 步）：{title}",
  "Still the stages of “{input}” (layer {layer}, head {head}): those of your input follow once the model has read it.": "仍是“{input}”的各个步骤（第 {layer} 层第 {head} 个头）：模型读完你的输入后会显示它的步骤。",
  "The stages of “{input}”, layer {layer}, head {head}{causal}.": "“{input}”的各个步骤，第 {layer} 层第 {head} 个头{causal}。",
  ", causal mask": "，因果掩码",
  "The text is empty (nothing the tokenizer keeps): type a sentence. The stages show the last one.": "文本为空（分词器没有保留任何内容）：请输入一个句子。这些步骤显示的是上一个句子的。",
  // view_digit.mjs
  "rollout: pixel (row {q}, column {k}) makes up {weight} of [CLS] at the top":
    "注意力展开：像素（第 {q} 行，第 {k} 列）占顶层 [CLS] 的 {weight}",
  "{label}: [CLS] → pixel (row {q}, column {k}): weight {weight}": "{label}：[CLS] → 像素（第 {q} 行，第 {k} 列）：权重 {weight}",
  "the attention rollout of [CLS] over the {n} x {n} pixels": "[CLS] 在 {n} × {n} 个像素上的注意力展开",
  "[CLS]'s attention weights on the {n} x {n} pixels": "[CLS] 对 {n} × {n} 个像素的注意力权重",
  "rows and columns are the image's pixel rows and columns": "行和列就是图像的像素行和列",
  "drawing pad, {s} by {s} pixels, {inked} inked; cursor at row {q}, column {k} (ink). Arrow keys move, Space inks or clears.":
    "绘图板，{s} × {s} 像素，已涂黑 {inked} 个；光标在第 {q} 行第 {k} 列（有墨迹）。方向键移动，空格键涂黑或清除。",
  "drawing pad, {s} by {s} pixels, {inked} inked; cursor at row {q}, column {k} (paper). Arrow keys move, Space inks or clears.":
    "绘图板，{s} × {s} 像素，已涂黑 {inked} 个；光标在第 {q} 行第 {k} 列（空白）。方向键移动，空格键涂黑或清除。",
  "Draw on the pad, or load a test digit: the models rerun.": "在绘图板上画，或载入一个测试数字：模型会重新运行。",
  "A digit you draw, read live by chapter 7's Vision Transformers": "你画的数字，由第 7 章的视觉 Transformer 实时读取",
  "Point at a pixel of a map to read [CLS]'s weight on it; click a map to enlarge it. On a touch screen, tap a map to enlarge it, then tap a pixel.":
    "指向图中的一个像素，可读出 [CLS] 在它上面的权重；点击一张图可将其放大。在触摸屏上，先点一张图将其放大，再点其中的像素。",
  "Draw": "画",
  "Erase": "擦除",
  "Clear": "清空",
  "choose…": "请选择…",
  "{heads} ({model})": "{heads}（{model}）",
  "test digit {nth}: a {digit}": "测试数字 {nth}：{digit}",
  "Draw a digit with the mouse, a pen or a finger (Erase clears pixels), or pick a test digit. With the keyboard: focus the pad, move with the arrow keys, Space inks or clears a pixel.":
    "用鼠标、笔或手指画一个数字（“擦除”可清除像素），或选择一个测试数字。使用键盘时：聚焦绘图板，用方向键移动，按空格键涂黑或清除一个像素。",
  "Load a test digit": "载入测试数字",
  "Model": "模型",
  "the model's probability of each digit": "模型对每个数字的概率",
  "Attention rollout (both layers, heads averaged, residual added)": "注意力展开（两层，各头取平均，加上残差）",
  "How much of each pixel reaches [CLS] at the top, with a colour scale of its own:": "每个像素有多少到达顶层的 [CLS]，使用单独的颜色刻度：",
  "In every map the dots mark the pixels inked at least half way (grey level 0.5 or more, as this chapter counts ink), and each head's label gives the weight [CLS] keeps on itself.":
    "每张图中的圆点标出至少涂黑一半的像素（灰度 0.5 及以上，与本章计算墨迹的方式相同）；每个头的标签给出 [CLS] 留在自身上的权重。",
  "{heads} ({model}) reads a {digit}, with probability {p}.": "{heads}（{model}）读出的是 {digit}，概率 {p}。",
  "The test digit is a {digit}.": "这个测试数字是 {digit}。",
  "The other head counts read the same pixels as: {others}.": "其他头数的模型把同样的像素读作：{others}。",
  "{heads}, a {digit} (probability {p})": "{heads}：{digit}（概率 {p}）",
  "{head} · {weight} on [CLS]": "{head} · [CLS] 上 {weight}",
  "Layer {layer}: [CLS]'s attention over the pixels, per head": "第 {layer} 层：每个头中 [CLS] 对像素的注意力",
  "rollout": "注意力展开",
  "Chapter 7's {model} ({heads}): [CLS]'s attention over the pixels": "第 7 章的 {model}（{heads}）：[CLS] 对像素的注意力",
  "Reads a {digit} (probability {p}) on a drawn digit": "在手绘数字上读出 {digit}（概率 {p}）",
  "Reads a {digit} (probability {p}) on a test digit, a {label}": "在测试数字（{label}）上读出 {digit}（概率 {p}）",
  "Each map: rows and columns are the image's; colour 0 to {vmax}.": "每张图：行和列即图像的行和列；颜色范围 0 到 {vmax}。",
  "Recomputed {where} in {ms} ms.": "已{where}重新计算，用时 {ms} 毫秒。",
  // view_induction.mjs
  "the sequence has {count} tokens; give 2 to {most}": "这个序列有 {count} 个词元；请给出 2 到 {most} 个",
  "token {i} is {token}, not a number in 0..{last}": "第 {i} 个词元是 {token}，不是 0..{last} 中的数",
  "New sequence with a repeat": "生成含重复片段的新序列",
  "Token ids 0–{last}, separated by spaces, 2 to {most} of them. A position can be predicted by copying when its token and the next one occurred together earlier: those positions are scored.":
    "词元 id 为 0–{last}，以空格分隔，共 2 到 {most} 个。如果某个位置的词元和下一个词元曾在前面一起出现过，这个位置就能靠复制来预测：这些位置会被计分。",
  "Your sequence": "你的序列",
  "position {i}: predicts {p}, not scored": "位置 {i}：预测 {p}，不计分",
  "position {i}: predicts {p}, the copy gives {copy}, right": "位置 {i}：预测 {p}，复制给出 {copy}，正确",
  "position {i}: predicts {p}, the copy gives {copy}, wrong": "位置 {i}：预测 {p}，复制给出 {copy}，错误",
  "Edit the sequence, move the slider or turn a head off: the model reruns.": "编辑序列、拖动滑块或关闭一个头：模型会重新运行。",
  "Chapter 5's model at its training checkpoints, on a sequence you edit": "第 5 章的模型在各训练检查点上处理你编辑的序列",
  "Training": "训练",
  "after {step} of {last} steps": "训练 {step} 步后（共 {last} 步）",
  "Under each position (the small number): the next token the model predicts there. Where copying gives the answer, ✓ marks it right, ✗ wrong (the copy's token under it); – elsewhere.":
    "每个位置（小数字）下方：模型在该位置预测的下一个词元。在复制能给出答案的位置，✓ 表示正确，✗ 表示错误（下方是复制给出的词元）；其他位置为 –。",
  "Each head's map: a row per query position, a column per key position (click a map to enlarge it with the tokens). Its label gives two scores on your sequence: prev, the head's mean weight on the previous token; ind, its mean weight on the token just after an earlier occurrence of the query's token (where an induction head looks).":
    "每个头的图：每行一个查询位置，每列一个键位置（点击一张图可放大并显示词元）。标签给出它在你的序列上的两个分数：prev 是该头在前一个词元上的平均权重；ind 是它在“查询词元上一次出现之后紧跟的词元”上的平均权重（归纳头关注的位置）。",
  "After {step} training steps, {on} of {total} heads on: {right} of {count} positions that copying can predict are right.":
    "训练 {step} 步后，{total} 个头中开启了 {on} 个：在能靠复制预测的 {count} 个位置中，{right} 个正确。",
  "After {step} training steps, {on} of {total} heads on: no position of this sequence can be predicted by copying (no pair of tokens occurs twice).":
    "训练 {step} 步后，{total} 个头中开启了 {on} 个：这个序列中没有能靠复制预测的位置（没有哪对词元出现两次）。",
  "{model}: chapter 5's model after {step} training steps, every head": "{model}：第 5 章的模型训练 {step} 步后，全部头",
  "Sequence: {ids}": "序列：{ids}",
  // view_patterns.mjs
  "every earlier key": "前面的全部键",
  "a sliding window": "滑动窗口",
  "BigBird's blocks": "BigBird 的块",
  "{n} key": "{n} 个键",
  "{n} keys": "{n} 个键",
  "a window of {keys} and the first {sinks} as sinks": "大小为 {keys}的窗口，并以前 {sinks} 个键为注意力汇点",
  "a window of {keys}": "大小为 {keys}的窗口",
  "BigBird's pattern on blocks of {block}": "BigBird 的块模式，块大小为 {block}",
  "trained on every earlier key (chapter 5's model)": "用前面的全部键训练（第 5 章的模型）",
  "trained with a window of 4": "用大小为 4 的窗口训练",
  "trained with a window of 8": "用大小为 8 的窗口训练",
  "trained block-sparse, blocks of 4": "用块稀疏模式训练，块大小为 4",
  "Pick a pattern or other weights, or edit the sequence: the model reruns.": "选择一种模式或另一组权重，或编辑序列：模型会重新运行。",
  "Chapter 9's models under an attention pattern you pick, on a sequence you edit": "第 9 章的模型在你选择的注意力模式下处理你编辑的序列",
  "Use the pattern these weights learned with": "使用这组权重训练时的模式",
  "{n} tokens": "{n} 个词元",
  "Window": "窗口",
  "Sinks": "汇点",
  "Block": "块",
  "Weights": "权重",
  "Each query sees": "每个查询可见",
  "The mask: a row per query, a column per key; bright where the query may attend, dark where it may not (the pattern and the causal mask together).":
    "掩码：每行一个查询，每列一个键；查询可以关注的位置为亮色，不可关注的为深色（由模式和因果掩码共同决定）。",
  "What a decoder's KV cache would hold after this sequence (float16, both layers), by how it stores keys and values:":
    "解码器处理完这个序列后，KV 缓存将占用的字节数（float16，两层），按键和值的存储方式列出：",
  "Under each position: the next token predicted. Where copying gives the answer, ✓ marks it right, ✗ wrong (the copy's token under it); – elsewhere.":
    "每个位置下方：预测的下一个词元。在复制能给出答案的位置，✓ 表示正确，✗ 表示错误（下方是复制给出的词元）；其他位置为 –。",
  "Each head's map under the pattern (click a map to enlarge it).": "每个头在该模式下的图（点击一张图可将其放大）。",
  "Weights {weights}, each query seeing {pattern}: {right} of {count} positions that copying can predict are right; for {reach} of them the key a copy needs is in sight.":
    "权重：{weights}；每个查询可见：{pattern}。在能靠复制预测的 {count} 个位置中，{right} 个正确；其中 {reach} 个位置上，复制所需的键在可见范围内。",
  "Weights {weights}, each query seeing {pattern}: no position of this sequence can be predicted by copying (no pair of tokens occurs twice).":
    "权重：{weights}；每个查询可见：{pattern}。这个序列中没有能靠复制预测的位置（没有哪对词元出现两次）。",
  "this pattern (the window and its sinks)": "此模式（窗口及其汇点）",
  "this pattern (BigBird keeps every key: a global or random block may need it)": "此模式（BigBird 需保留全部键：全局块或随机块可能用到它们）",
  "this pattern (every key)": "此模式（全部键）",
  "every key, 4 key/value heads (MHA)": "全部键，4 个键/值头（MHA）",
  "2 key/value heads (GQA)": "2 个键/值头（GQA）",
  "1 key/value head (MQA)": "1 个键/值头（MQA）",
  "latent of {rank} + RoPE key of {rope} (MLA)": "{rank} 维潜在向量 + {rope} 维 RoPE 键（MLA）",
  "cache": "缓存",
  "bytes after {count} tokens": "{count} 个词元后的字节数",
  "mask: {pattern}": "掩码：{pattern}",
  "{model}: {weights}, each query seeing {pattern}": "{model}：{weights}；每个查询可见：{pattern}",
  // view_prune.mjs
  "Turn heads off and on: the embeddings and the scores are recomputed.": "关闭或开启注意力头：嵌入和分数会重新计算。",
  "Turn MiniLM's heads off and watch the embeddings and the maps change": "关闭 MiniLM 的注意力头，观察嵌入和注意力图的变化",
  "The maps below are those of the sentence “{text}”: a head turned off still computes its weights (drawn grey), but its output no longer reaches the next layer.":
    "下面是句子“{text}”的注意力图：被关闭的头仍会计算它的权重（以灰色显示），但它的输出不再传到下一层。",
  "{on} of {total} heads on. Embedding fidelity (mean cosine to the unpruned embeddings): ":
    "{total} 个头中开启了 {on} 个。嵌入保真度（与未剪枝嵌入的平均余弦相似度）：",
  ". Paraphrase ranking (mean reciprocal rank of each paraphrase, 1 = always first; all heads on: {all}): ":
    "。复述排序（每个复述句的平均倒数排名，1 = 总是排第一；全部头开启时为 {all}）：",
  ".": "。",
  ", and the word vectors of the words of its sentence and {count} texts ({size})":
    "，以及所显示句子和 {count} 段文本中各词的词向量（{size}）",
  "The text is empty (nothing the tokenizer keeps): the maps show the last one.": "文本为空（分词器没有保留任何内容）：图中仍是上一段文本的结果。",
  "Recomputed {count} embeddings and the maps {where} in {ms} ms.": "已{where}重新计算 {count} 个嵌入和注意力图，用时 {ms} 毫秒。",
  // view_sentence.mjs
  "Type a sentence of your own: the model reruns as you type.": "输入你自己的句子：模型会随着你的输入重新运行。",
  "Your sentence": "你的句子",
  "Live attention maps of all-MiniLM-L6-v2 for a sentence you type": "all-MiniLM-L6-v2 对你输入的句子的实时注意力图",
  "Back to the book's model": "换回本书的模型",
  "Read it with your own model: an .onnx file that mha_lib.export.export_onnx wrote from a BertEncoder with MiniLM's vocabulary (MiniLM fine-tuned, or with the same number of heads pruned in every layer; BERT-base uncased). It is read here, never uploaded.":
    "用你自己的模型读取：一个由 mha_lib.export.export_onnx 从使用 MiniLM 词表的 BertEncoder 导出的 .onnx 文件（微调过的 MiniLM，或每层剪掉相同数量头的 MiniLM；BERT-base uncased）。文件只在本页读取，不会上传。",
  "Reading “{name}” ({size}) in your browser…": "正在你的浏览器中读取“{name}”（{size}）…",
  "Your model “{name}” ({layers}, {heads} each) reads the text {where}, with MiniLM's tokenizer; its file was not uploaded.":
    "你的模型“{name}”（{layers}，每层 {heads}）{where}用 MiniLM 的分词器读取文本；它的文件没有上传。",
  "Your model “{name}” ({layers}, {heads} each) reads the next text you type, in your browser, with MiniLM's tokenizer; its file was not uploaded.":
    "你的模型“{name}”（{layers}，每层 {heads}）会在你的浏览器中用 MiniLM 的分词器读取你接下来输入的文本；它的文件没有上传。",
  "Your model was not used: {reason}.": "未使用你的模型：{reason}。",
  "Still the maps of “{text}” by your model “{model}”: those of your text follow once the model has read it.":
    "仍是你的模型“{model}”对“{text}”的注意力图：模型读完你的文本后，会显示新文本的图。",
  "The maps of “{text}” by your model “{model}”.": "你的模型“{model}”对“{text}”的注意力图。",
  "Still the maps of “{text}”: those of your text follow once the model has read it.":
    "仍是“{text}”的注意力图：模型读完你的文本后，会显示新文本的图。",
  "The maps of “{text}”.": "“{text}”的注意力图。",
  "The maps of “{text}”": "“{text}”的注意力图。",
  "The text is empty (nothing the tokenizer keeps): type a sentence. The maps show the last one.":
    "文本为空（分词器没有保留任何内容）：请输入一个句子。图中仍是上一句的结果。",
  "{count} tokens, recomputed {where} in {ms} ms.": "{count} 个词元，已{where}重新计算，用时 {ms} 毫秒。",
  // view_timing.mjs
  "Press the button to time the same attention function on this device: a second curve appears.":
    "按下按钮，在这台设备上为同一个注意力函数计时：图中会出现第二条曲线。",
  "Time of attention for 1 to 64 heads at equal FLOPs, on this device": "在这台设备上，浮点运算次数相同时 1 到 64 个头的注意力耗时",
  "mha_lib's attention function on q, k and v of shape (B, H, L, d_k) = ({B}, H, {L}, {d}/H) for H = {heads}: {flops} million matmul FLOPs every time, and a (B, H, L, L) map of weights that grows with H ({map} at H = {most}). Each head count is timed {repeats} times, round-robin, after a warm-up.":
    "mha_lib 的注意力函数，q、k、v 的形状为 (B, H, L, d_k) = ({B}, H, {L}, {d}/H)，H = {heads}：每次都是 {flops} 百万次矩阵乘法浮点运算，外加一个随 H 增大的 (B, H, L, L) 权重图（H = {most} 时为 {map}）。预热之后，各个头数轮流计时，每个 {repeats} 次。",
  "Time it on this device": "在这台设备上计时",
  "In a notebook the kernel's machine is the one section 2 times: run its cells. The book's numbers are shown below.":
    "在 notebook 中，第 2 节计时的就是内核所在的机器：运行那些单元格即可。下面显示的是本书的数据。",
  "the chart and its numbers": "图表及其数据",
  "Line chart: time of one call against the number of heads, as a multiple of one head's; the book's machine reaches {book}× at H = {most}, this device {mine}×.":
    "折线图：单次调用耗时随头数的变化，以单头耗时的倍数表示；H = {most} 时，本书的机器达到 {book}×，这台设备为 {mine}×。",
  "Line chart: time of one call against the number of heads, as a multiple of one head's; the book's machine reaches {book}× at H = {most}; this device not timed yet.":
    "折线图：单次调用耗时随头数的变化，以单头耗时的倍数表示；H = {most} 时，本书的机器达到 {book}×；这台设备尚未计时。",
  "Line chart: time of one call against the number of heads, as a multiple of one head's; the book's machine reaches {book}× at H = {most}; this device was too busy for its curve to mean anything.":
    "折线图：单次调用耗时随头数的变化，以单头耗时的倍数表示；H = {most} 时，本书的机器达到 {book}×；这台设备太忙，它的曲线没有意义。",
  "attention map": "注意力图",
  "book's machine": "本书的机器",
  "this device": "这台设备",
  "Median time of one call (and as a multiple of H = 1; on this device, the fastest and slowest call). The book's machine: {machine}.":
    "单次调用的中位耗时（括号内为相对 H = 1 的倍数；这台设备另列最快和最慢的一次调用）。本书的机器：{machine}。",
  "Timing H = {H} on this device: call {done} of {total}…": "正在这台设备上为 H = {H} 计时：第 {done} 次调用，共 {total} 次…",
  "Timed on this device ({provider}): {heads} heads took {ratio}× one head's time (median of {repeats}, the bars the fastest and slowest call; the book's machine: {book}×). A laptop on battery, a busy tab or another window can slow single calls: time it again to see the spread.":
    "已在这台设备上计时（{provider}）：{heads} 个头的耗时是单头的 {ratio}×（{repeats} 次的中位数，竖线为最快和最慢的一次调用；本书的机器：{book}×）。使用电池的笔记本电脑、繁忙的标签页或其他窗口都可能拖慢单次调用：再计时一次可以看到波动范围。",
  "Timed on this device: {heads} heads took {ratio}× one head's time (median of {repeats}, the bars the fastest and slowest call; the book's machine: {book}×). A laptop on battery, a busy tab or another window can slow single calls: time it again to see the spread.":
    "已在这台设备上计时：{heads} 个头的耗时是单头的 {ratio}×（{repeats} 次的中位数，竖线为最快和最慢的一次调用；本书的机器：{book}×）。使用电池的笔记本电脑、繁忙的标签页或其他窗口都可能拖慢单次调用：再计时一次可以看到波动范围。",
  "This device was too busy to time the heads: {later} heads came out faster than {earlier} in every one of {repeats} rounds, which the same FLOPs and a larger map of weights cannot explain. The curve means nothing; close other tabs or windows and time it again.":
    "这台设备太忙，无法为各头数计时：在全部 {repeats} 轮中，{later} 个头都比 {earlier} 个头更快，而相同的浮点运算量和更大的权重图无法解释这一点。这条曲线没有意义；请关闭其他标签页或窗口后再计时一次。",
  "The timing stopped ({error}).": "计时中止（{error}）。",
  // view_speed.mjs
  "Press the button to time every live view on this device; the views being timed show below the table.":
    "按下按钮，在这台设备上为每个实时视图计时；被计时的视图显示在表格下方。",
  "How fast the live views answer on this device and on the book's machine": "实时视图在这台设备和本书的机器上的响应速度",
  "Time the views on this device": "在这台设备上为各视图计时",
  "Each view is timed as benchmarks/bench_live.py times it on the book's machine: its first update (the runtime and its models downloaded, or read from your browser's cache, compiled and run) and the median of {warm} more, with new inputs as a reader gives them. Times vary with what else the device does.":
    "每个视图的计时方式与 benchmarks/bench_live.py 在本书的机器上相同：第一次更新（下载运行时和模型，或从浏览器缓存读取，再编译并运行），以及之后 {warm} 次更新的中位数，每次都换上读者会给的新输入。耗时随设备同时在做的其他事情而变化。",
  "In a notebook the kernel computes the views: this table times them in the book's pages. The book's machine's times are shown.":
    "在 notebook 中由内核计算各视图：这个表格为本书网页中的视图计时。下面显示的是本书机器上的耗时。",
  "The views being timed": "被计时的视图",
  "the table of times": "耗时表",
  "time them with WebGPU": "用 WebGPU 计时",
  "time them with WebAssembly": "用 WebAssembly 计时",
  " (a software adapter: a CPU emulating a GPU, so its times say nothing of a GPU)": "（软件适配器：用 CPU 模拟 GPU，所以它的耗时说明不了 GPU 的情况）",
  "Here the views run on WebGPU{software}.": "这里的视图在 WebGPU{software}上运行。",
  "Here the views run on WebAssembly.": "这里的视图在 WebAssembly 上运行。",
  "This browser also has WebGPU{software}: ": "这个浏览器也有 WebGPU{software}：",
  "view": "视图",
  "book's machine: first": "本书的机器：首次",
  // biome-ignore lint/suspicious/noThenProperty: a catalog key (the English word), ZH is never awaited
  "then": "之后",
  "this device ({provider}): first": "这台设备（{provider}）：首次",
  "Time to the maps of a first update and (then) the median of later ones. The book's machine: {machine}, load average {load} while timed.":
    "首次更新到画出图的耗时，以及（之后）后续更新的中位数。本书的机器：{machine}，计时期间的负载均值为 {load}。",
  "Timing the {view} view ({n} of {count})…": "正在为 {view} 视图计时（第 {n} 个，共 {count} 个）…",
  "Timed every view on this device.": "已在这台设备上为每个视图计时。",
  // view_toy_compare.mjs
  "Change a token or move the mark: every model reruns.": "修改一个词元或移动标记：每个模型都会重新运行。",
  "Live attention maps and predictions of the toy models on a sequence you edit": "玩具模型在你编辑的序列上的实时注意力图和预测",
  "the sequence: tokens and the mark": "序列：词元和标记",
  "token at position {i}": "位置 {i} 的词元",
  "mark position {i}": "标记位置 {i}",
  "Pick a token at any position, and the marked position with the round buttons. Each model predicts every position's label; ✓ right, ✗ wrong.":
    "在任意位置选择一个词元，并用圆形按钮选择被标记的位置。每个模型都会预测每个位置的标签；✓ 表示正确，✗ 表示错误。",
  "Scroll the row sideways for all {count} positions; the predictions below scroll the same way.":
    "横向滚动这一行可看到全部 {count} 个位置；下方的预测会同步滚动。",
  "Add your own model: an .onnx file that mha_lib.export.export_onnx wrote from a chapter-1 model (it is read here, never uploaded)":
    "添加你自己的模型：一个由 mha_lib.export.export_onnx 从第 1 章模型导出的 .onnx 文件（只在本页读取，不会上传）",
  "Label at position i: (token i−1 {op} marked token) mod {vocab}; the marked token is {token}, at position {m}.":
    "位置 i 的标签：（位置 i−1 的词元 {op} 被标记的词元）mod {vocab}；被标记的词元是 {token}，位于位置 {m}。",
  "prediction at each position (✓ right, ✗ wrong)": "每个位置的预测（✓ 正确，✗ 错误）",
  "a model named “{name}” is already shown": "名为“{name}”的模型已经显示",
  "“{name}” gives {classes} classes and maps of {tokens} tokens on this sequence; chapter 1's task needs {vocab} classes and {length} tokens":
    "“{name}”在这个序列上给出 {classes} 个类别和 {tokens} 个词元的注意力图；第 1 章的任务需要 {vocab} 个类别和 {length} 个词元",
  "Your model was not added: {reason}.": "未添加你的模型：{reason}。",
  "Your model “{name}” ({layers}, {heads}) runs in your browser beside the book's; its file was not uploaded.":
    "你的模型“{name}”（{layers}，每层 {heads}）在你的浏览器中与本书的模型一起运行；它的文件没有上传。",
  "{model}: {heads}, {right} of {asked} positions right": "{model}：{heads}，{asked} 个位置中 {right} 个正确",
  "position {i}: no label": "位置 {i}：无标签",
  "position {i}: predicts {p}, the label is {label}, right": "位置 {i}：预测 {p}，标签是 {label}，正确",
  "position {i}: predicts {p}, the label is {label}, wrong": "位置 {i}：预测 {p}，标签是 {label}，错误",
  "Chapter 1's toy models {models}: every head": "第 1 章的玩具模型 {models}：全部头",
  "Sequence: {ids} (marked position {m})": "序列：{ids}（标记位置 {m}）",
  // view_translate.mjs
  "the sentence has {count} words; give 1 to {most}": "这个句子有 {count} 个词；请给出 1 到 {most} 个",
  "word {i} is {word}, not one of s0 .. s{last}": "第 {i} 个词（从 0 数起）是 {word}，不在 s0 … s{last} 之中",
  "Type a sentence in the toy language: the model translates it, one step at a time.": "用玩具语言输入一个句子：模型会一步一步地翻译它。",
  "Chapter 6's encoder-decoder translating a sentence you type, step by step": "第 6 章的编码器-解码器一步一步地翻译你输入的句子",
  "Point at a cell to read which source word a step looked at; click a map to enlarge it. On a touch screen, tap a map to enlarge it, then tap a cell.":
    "指向一个格子，可读出某一步关注的是哪个源词；点击一张图可将其放大。在触摸屏上，先点一张图将其放大，再点其中的格子。",
  "New sentence": "新句子",
  "Play the decoding": "播放解码过程",
  "aligned {weight}": "对齐词上的权重 {weight}",
  "Words s0 … s{last}, separated by spaces, 1 to {hi} of them (the model was trained on {lo} to {hi}). The task's translation swaps each word for its dictionary word and reverses the order.":
    "词为 s0 … s{last}，以空格分隔，共 1 到 {hi} 个（模型训练时用的是 {lo} 到 {hi} 个）。任务的翻译把每个词换成它在词典中对应的词，并把词序倒过来。",
  "Decoding": "解码",
  "Each step's output, with the correct word small above it: ✓ right, ✗ wrong; the steps after the one chosen are dim.":
    "每一步的输出，上方小字是正确的词：✓ 正确，✗ 错误；所选步骤之后的步骤显示为浅色。",
  "Cross-attention of each decoder head: a row per step taken (labelled, when enlarged, by the word the step wrote; the chapter's figures label the same rows by the decoder's input, <bos> and the words before), a column per source word and the source's <eos>. Counting from 0, the step that writes word j of an n-word sentence translates source word n − 1 − j: the anti-diagonal. “aligned” on each map is the head's mean weight on that word, over the steps that write a word.":
    "每个解码器头的交叉注意力：每行是已完成的一步（放大时以这一步写出的词作为行标签；本章的图用解码器的输入，即 <bos> 和之前的词，来标注同样的行），每列是一个源词，最后一列是源句的 <eos>。从 0 开始计数，写出 n 词句子中第 j 个词的那一步，翻译的是第 n − 1 − j 个源词：即反对角线。每张图上的“aligned”是该头在这个源词上的平均权重，取所有写出词的步骤的平均。",
  "step {nth} of {count}": "第 {nth} 步，共 {count} 步",
  "{step}: wrote {word}": "{step}：写出 {word}",
  "Written: {written}.": "已写出：{written}。",
  "Written after step {nth}: {written}.": "第 {nth} 步后已写出：{written}。",
  "The model's translation matches the correct one word for word (correct: {correct}).":
    "模型的翻译与正确答案逐词一致（正确答案：{correct}）。",
  "The model's translation has {right} of {count} tokens of the correct one (correct: {correct}).":
    "模型的翻译包含正确答案 {count} 个词元中的 {right} 个（正确答案：{correct}）。",
  "nothing": "无",
  "step {nth}: not taken (the task has {task})": "第 {nth} 步：未执行（任务的答案是 {task}）",
  "step {nth}: wrote {wrote} (probability {p}), the task has {task}, right":
    "第 {nth} 步：写出 {wrote}（概率 {p}），任务的答案是 {task}，正确",
  "step {nth}: wrote {wrote} (probability {p}), the task has {task}, wrong":
    "第 {nth} 步：写出 {wrote}（概率 {p}），任务的答案是 {task}，错误",
  "decoder layer {layer}: cross-attention": "解码器第 {layer} 层：交叉注意力",
  "{model}: cross-attention of every decoder head, step {nth} of {count}": "{model}：每个解码器头的交叉注意力，第 {nth} 步，共 {count} 步",
  "Source: {source}; output: {output}": "源句：{source}；输出：{output}",
  "Rows are steps, columns source words; colour 0 to {vmax}.": "行是步骤，列是源词；颜色范围 0 到 {vmax}。",
  "Translated {where} in {steps} steps, {ms} ms.": "已{where}完成翻译：{steps} 步，用时 {ms} 毫秒。",
};
