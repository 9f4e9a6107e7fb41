# Reference tests (label "reference"): trident against independent implementations.

# GPT-2 tokenizer vs GPT-2's JS reference encoder (node, gpt-3-encoder@1.1.4 from npm), on the
# fortunes corpus and adversarial strings; plus decode(encode(x)) == x.
add_executable(tokenizer_roundtrip ${CMAKE_CURRENT_SOURCE_DIR}/reference/tokenizer_roundtrip.cpp)
target_link_libraries(tokenizer_roundtrip PRIVATE trident_io)
add_test(NAME tokenizer_vs_js
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reference/tokenizer_vs_js.sh $<TARGET_FILE:trident>
                 $<TARGET_FILE:tokenizer_roundtrip> ${CMAKE_CURRENT_BINARY_DIR}/tokenizer_vs_js)
set_tests_properties(tokenizer_vs_js PROPERTIES LABELS reference SKIP_RETURN_CODE 77 TIMEOUT 600)
# The CPU Llama model (grouped-query attention, untied head; with and without q/k/v biases)
# against a PyTorch Llama with Hugging Face LlamaForCausalLM semantics written in the check.
# llama-sft: the same with --task sft's masked loss (targets partly masked, mean over the trained ones).
# llama-dpo: --task dpo's pair loss (beta, label smoothing) against a reference model of other
# weights, on those masked samples as pairs; also each step's reward accuracy and mean rewards.
# llama-ipo: the same with dpo.loss = ipo.
# llama-reward: a reward model (--task reward: score head, pairwise loss over the trained pairs).
foreach(variant llama llama-qkv-bias llama-sft llama-dpo llama-ipo llama-reward)
  add_test(NAME reference_${variant}_vs_torch
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reference/run_torch_check.sh $<TARGET_FILE:dump_reference>
                   ${CMAKE_CURRENT_SOURCE_DIR}/reference/check_llama_vs_torch.py cpu 10 ${variant})
  set_tests_properties(reference_${variant}_vs_torch PROPERTIES LABELS reference ENVIRONMENT OMP_NUM_THREADS=2)
endforeach()

# tokenizer.json tokenizers (Llama 3, Qwen 3) vs the JS reference encoder @lenml/tokenizers
# (npm, installed into the build tree), on the fortunes corpus and adversarial strings.
add_test(NAME hf_tokenizer_vs_js
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reference/hf_tokenizer_vs_js.sh $<TARGET_FILE:trident>
                 ${CMAKE_CURRENT_BINARY_DIR}/hf_tokenizer_vs_js)
set_tests_properties(hf_tokenizer_vs_js PROPERTIES LABELS reference SKIP_RETURN_CODE 77 TIMEOUT 600)

# safetensors files trident writes read by an independent reader in Python, and files an
# independent Python writer makes read by trident (values, dtypes, shards, bad files).
add_executable(safetensors_tool reference/safetensors_tool.cpp)
target_link_libraries(safetensors_tool PRIVATE trident_io nlohmann_json::nlohmann_json)
add_test(NAME reference_safetensors
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/reference/check_safetensors.py
                 $<TARGET_FILE:safetensors_tool>)
set_tests_properties(reference_safetensors PROPERTIES LABELS reference)

# trident convert against PyTorch models fed Hugging Face-named weights through a name map written
# in the check (GPT-2's Conv1D transposed): import, train --init.from, export (f32, bf16); and
# reward models (*ForSequenceClassification) in and out, scored as transformers pools them.
add_executable(hf_logits reference/hf_logits.cpp)
target_link_libraries(hf_logits PRIVATE trident_test_support trident_io)
add_test(NAME reference_hf_convert
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/reference/check_hf_convert.py $<TARGET_FILE:trident>
                 $<TARGET_FILE:hf_logits> ${CMAKE_SOURCE_DIR})
set_tests_properties(reference_hf_convert PROPERTIES LABELS reference ENVIRONMENT OMP_NUM_THREADS=2)

# GRPO and PPO losses (group advantages, clipped ratio, k3 KL, entropy, GAE, clipped value loss;
# both loss normalisations) against PyTorch autograd: losses and gradients within 1e-5.
add_executable(dump_rl_loss reference/dump_rl_loss.cpp)
target_link_libraries(dump_rl_loss PRIVATE trident_train nlohmann_json::nlohmann_json)
add_test(NAME reference_rl_loss
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/reference/check_rl_loss.py $<TARGET_FILE:dump_rl_loss>)
set_tests_properties(reference_rl_loss PROPERTIES LABELS reference)

# trident's Jinja interpreter against Python's jinja2 set up as transformers renders chat templates:
# real templates (tests/fixtures/chat_templates) on a set of conversations, and small templates
# for each construct of the subset, compared byte for byte.
add_executable(jinja_render reference/jinja_render.cpp)
target_link_libraries(jinja_render PRIVATE trident_io nlohmann_json::nlohmann_json)
add_test(NAME reference_chat_templates
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/reference/check_chat_templates.py
                 $<TARGET_FILE:jinja_render> ${CMAKE_SOURCE_DIR}/tests/fixtures/chat_templates)
set_tests_properties(reference_chat_templates PROPERTIES LABELS reference)
