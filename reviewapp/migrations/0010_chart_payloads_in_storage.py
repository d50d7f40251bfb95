"""Chart payloads move from the database to storage (issue 12): the new columns first."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('reviewapp', '0009_policy_help_text'),
    ]

    operations = [
        migrations.AddField(
            model_name='comparisonchart',
            name='storage_name',
            field=models.CharField(blank=True, help_text="the comparison step's chart object in storage", max_length=300),
        ),
        migrations.AddField(
            model_name='comparisonchart',
            name='offset',
            field=models.PositiveBigIntegerField(default=0, help_text='first byte of this payload'),
        ),
        migrations.AddField(
            model_name='comparisonresult',
            name='pending_charts_name',
            field=models.CharField(blank=True, help_text='chart object the running attempt is writing (deleted if it is lost)', max_length=300),
        ),
        migrations.AlterField(
            model_name='comparisonchart',
            name='payload',
            field=models.TextField(blank=True, default=''),
        ),
    ]
