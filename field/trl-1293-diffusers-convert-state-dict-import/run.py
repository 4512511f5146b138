from trl import SFTTrainer
