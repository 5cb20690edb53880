"""Every field name TRL's `trl grpo` script takes, for recognising TRL flags on grpokit's command line.

Generated from the installed TRL 1.16.0: `dataclasses.fields` of `trl.GRPOConfig` (with transformers'
`TrainingArguments` it extends), `trl.scripts.grpo.GRPOScriptArguments` and `trl.ModelConfig`; plus the fields
open-r1's `GRPOConfig` / `GRPOScriptArguments` add (huggingface/open-r1 src/open_r1/configs.py), whose recipes are
TRL files too, and the older TRL name they use (`torch_dtype`). A name here is translated by meaning
(`grpokit.config.compat.trl`) or named as unsupported; a
`--flag` that is neither a grpokit option nor one of these is refused with the closest name.
"""

from __future__ import annotations

# fmt: off
GRPO_CONFIG = frozenset({
    'accelerator_config', 'adam_beta1', 'adam_beta2', 'adam_epsilon', 'auto_find_batch_size',
    'average_tokens_across_devices', 'batch_eval_metrics', 'beta', 'bf16', 'bf16_full_eval', 'cache_implementation',
    'cast_lm_head_to_fp32', 'chat_template_kwargs', 'data_seed', 'dataloader_drop_last', 'dataloader_in_order',
    'dataloader_multiprocessing_context', 'dataloader_num_workers', 'dataloader_persistent_workers',
    'dataloader_pin_memory', 'dataloader_prefetch_factor', 'ddp_backend', 'ddp_broadcast_buffers',
    'ddp_bucket_cap_mb', 'ddp_find_unused_parameters', 'ddp_static_graph', 'ddp_timeout', 'debug', 'deepspeed',
    'delta', 'disable_dropout', 'disable_tqdm', 'do_eval', 'do_predict', 'do_train', 'ds3_gather_for_generation',
    'enable_jit_checkpoint', 'entropy_coef', 'entropy_coef_delta', 'entropy_coef_max', 'entropy_coef_min',
    'entropy_target', 'epsilon', 'epsilon_high', 'eval_accumulation_steps', 'eval_delay', 'eval_do_concat_batches',
    'eval_on_start', 'eval_steps', 'eval_strategy', 'eval_use_gather_object', 'fp16', 'fp16_full_eval', 'fsdp',
    'fsdp_config', 'full_determinism', 'generation_batch_size', 'generation_kwargs', 'gradient_accumulation_steps',
    'gradient_checkpointing', 'gradient_checkpointing_kwargs', 'greater_is_better', 'hub_always_push',
    'hub_model_id', 'hub_private_repo', 'hub_revision', 'hub_strategy', 'hub_token', 'ignore_data_skip',
    'importance_sampling_level', 'include_for_metrics', 'include_num_input_tokens_seen', 'label_names',
    'label_smoothing_factor', 'learning_rate', 'length_column_name', 'liger_kernel_config',
    'load_best_model_at_end', 'local_rank', 'log_completions', 'log_completions_hub_repo', 'log_level',
    'log_level_replica', 'log_multimodal', 'log_on_each_node', 'log_unique_prompts', 'logging_first_step',
    'logging_nan_inf_filter', 'logging_steps', 'logging_strategy', 'loss_type', 'lr_scheduler_kwargs',
    'lr_scheduler_type', 'mask_truncated_completions', 'max_completion_length', 'max_grad_norm', 'max_steps',
    'max_tool_calling_iterations', 'metric_for_best_model', 'min_p', 'model_init_kwargs',
    'multi_objective_aggregation', 'neftune_noise_alpha', 'num_completions_to_print', 'num_generations',
    'num_generations_eval', 'num_iterations', 'num_train_epochs', 'off_policy_mask_threshold', 'optim',
    'optim_args', 'optim_target_modules', 'output_dir', 'pad_to_multiple_of', 'parallelism_config',
    'per_device_eval_batch_size', 'per_device_train_batch_size', 'prediction_loss_only', 'project', 'push_to_hub',
    'ref_model_mixup_alpha', 'ref_model_sync_steps', 'remove_unused_columns', 'repetition_penalty', 'report_to',
    'restore_callback_states_from_checkpoint', 'resume_from_checkpoint', 'reward_weights', 'router_aux_loss_coef',
    'run_name', 'sapo_temperature_neg', 'sapo_temperature_pos', 'save_on_each_node', 'save_only_model',
    'save_steps', 'save_strategy', 'save_total_limit', 'scale_rewards', 'seed', 'shuffle_dataset',
    'skip_memory_metrics', 'steps_per_generation', 'sync_ref_model', 'temperature', 'tf32', 'top_entropy_quantile',
    'top_k', 'top_p', 'torch_compile', 'torch_compile_backend', 'torch_compile_mode', 'torch_empty_cache_steps',
    'trackio_bucket_id', 'trackio_space_id', 'trackio_static_space_id', 'train_sampling_strategy',
    'transformers_continuous_batching_config', 'trust_remote_code', 'use_adaptive_entropy',
    'use_bias_correction_kl', 'use_cache', 'use_cpu', 'use_liger_kernel', 'use_transformers_continuous_batching',
    'use_transformers_paged', 'use_vllm', 'vespo_k_neg', 'vespo_k_pos', 'vespo_lambda_neg', 'vespo_lambda_pos',
    'vllm_enable_sleep_mode', 'vllm_gpu_memory_utilization', 'vllm_group_port', 'vllm_importance_sampling_cap',
    'vllm_importance_sampling_clip_max', 'vllm_importance_sampling_clip_min', 'vllm_importance_sampling_correction',
    'vllm_importance_sampling_mode', 'vllm_max_model_length', 'vllm_mode', 'vllm_model_impl',
    'vllm_server_base_url', 'vllm_server_host', 'vllm_server_port', 'vllm_server_timeout',
    'vllm_structured_outputs_regex', 'vllm_tensor_parallel_size', 'warmup_steps', 'weight_decay',
})

SCRIPT_AND_MODEL = frozenset({
    'attn_implementation', 'bnb_4bit_quant_storage', 'bnb_4bit_quant_type', 'dataset_config', 'dataset_name',
    'dataset_streaming', 'dataset_test_split', 'dataset_train_split', 'dtype', 'ignore_bias_buffers',
    'load_in_4bit', 'load_in_8bit', 'lora_alpha', 'lora_dropout', 'lora_modules_to_save', 'lora_r',
    'lora_target_modules', 'lora_target_parameters', 'lora_task_type', 'model_name_or_path', 'model_revision',
    'reward_funcs', 'reward_model_name_or_path', 'use_bnb_nested_quant', 'use_dora', 'use_peft', 'use_rslora',
})

OPEN_R1 = frozenset({
    'torch_dtype',  # ModelConfig's name before TRL 1.x renamed it dtype; open-r1's recipes use it
    'benchmarks', 'callbacks', 'chat_template', 'code_eval_scoring_mode', 'code_eval_test_batch_size',
    'code_language', 'code_provider', 'cosine_max_len', 'cosine_max_value_correct', 'cosine_max_value_wrong',
    'cosine_min_value_correct', 'cosine_min_value_wrong', 'dataset_mixture', 'dataset_prompt_column',
    'e2b_router_url', 'enforce_same_language', 'hub_model_revision', 'ioi_provider', 'max_completion_len',
    'morph_router_url', 'overwrite_hub_revision', 'parallel_code_exec_per_proc', 'push_to_hub_revision',
    'repetition_max_penalty', 'repetition_n_grams', 'soft_punish_cache', 'system_prompt', 'wandb_entity',
    'wandb_project', 'wandb_run_group',
})

# fmt: on

ALL = GRPO_CONFIG | SCRIPT_AND_MODEL | OPEN_R1
