"""ddp_tutorial.py - a training script written the way PyTorch's DDP
tutorial writes it ("multigpu_torchrun.py": a Trainer class, a
DistributedSampler, a snapshot saved every few epochs and resumed from),
adapted to the CPU and gloo.  It knows nothing about stepscope; it is here to
show that `stepscope run --auto` observes such a script unmodified:

    stepscope run --auto -n 2 -- python3 examples/ddp_tutorial.py 4 2
    stepscope run --auto -n 2 -- python3 examples/ddp_tutorial.py 8 2   # resumes

Arguments: total epochs, snapshot every K epochs, --batch_size,
--snapshot_path (default snapshot.pt), --dataset_size.  When the snapshot
file exists, training resumes from the epoch after the one it holds.
"""
import argparse
import os

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MyTrainDataset(Dataset):
    def __init__(self, size):
        self.size = size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.data[index]


def ddp_setup():
    init_process_group(backend="gloo")


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path):
        self.rank = int(os.environ["LOCAL_RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model)

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path, map_location="cpu")
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[CPU{self.rank}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        self.train_data.sampler.set_epoch(epoch)
        loss = 0.0
        for source, targets in self.train_data:
            loss = self._run_batch(source, targets)
        return loss

    def _save_snapshot(self, epoch):
        snapshot = {
            "MODEL_STATE": self.model.module.state_dict(),
            "EPOCHS_RUN": epoch + 1,
        }
        torch.save(snapshot, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            loss = self._run_epoch(epoch)
            if self.rank == 0:
                print(f"Epoch {epoch} | loss {loss:.4f}")
            if self.rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs(dataset_size):
    train_set = MyTrainDataset(dataset_size)
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    return train_set, model, optimizer


def prepare_dataloader(dataset, batch_size):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        pin_memory=False,
        shuffle=False,
        sampler=DistributedSampler(dataset),
    )


def main(save_every, total_epochs, batch_size, snapshot_path, dataset_size):
    ddp_setup()
    torch.manual_seed(0)
    dataset, model, optimizer = load_train_objs(dataset_size)
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path)
    trainer.train(total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=32, type=int,
                        help="Input batch size on each process (default: 32)")
    parser.add_argument("--snapshot_path", default="snapshot.pt",
                        help="Where the snapshot is saved and resumed from")
    parser.add_argument("--dataset_size", default=2048, type=int,
                        help="Samples in the synthetic data set (default: 2048)")
    args = parser.parse_args()
    main(args.save_every, args.total_epochs, args.batch_size, args.snapshot_path,
         args.dataset_size)
